// The requests that make or read a directory's files without a policy: synth and report.
#include <cmath>
#include <filesystem>

#include "dqntrader/core/error.hpp"
#include "dqntrader/data/timestamp.hpp"
#include "dqntrader/request/requests.hpp"
#include "dqntrader/request/tables.hpp"

namespace dqntrader::request {

Table synth_table() {
  const data::SynthConfig d;
  Table t;
  t.command = "synth";
  t.summary =
      "generate synthetic bars with switching regimes, jumps and an 'ofi' column that predicts "
      "the next bar's return (the built-in default data)";
  Option bars = option("bars", Kind::whole, "number of bars", "1", std::to_string(d.bars));
  bars.least = 2;
  bars.most = std::size_t{1} << 30;
  Option symbols = option("symbols", Kind::whole,
                          "instruments: more than 1 writes a universe (a CSV file with a symbol "
                          "column, or a .dqnbars cache of several) of instruments S01, S02, ... "
                          "sharing a common factor, the first half with a planted ofi signal of "
                          "falling strength, the others none",
                          "0", std::to_string(d.symbols));
  symbols.least = 1;
  symbols.most = 100000;
  t.options = {
      bars,
      option("seed", Kind::whole, "random seed", "-1", std::to_string(d.seed)),
      option("start", Kind::text, "first timestamp (ISO-8601, UTC)", "soon",
             data::format_iso8601_ms(d.start_ms).substr(0, 10)),
      option("interval-seconds", Kind::number, "time between bars", "0",
             train::number_text(static_cast<double>(d.interval_ms) / 1000.0)),
      option("initial-price", Kind::number, "the first bar's open", "0",
             train::number_text(d.initial_price)),
      option("ofi-signal", Kind::number,
             "correlation of ofi with the next bar's return shock, in [0, 1]", "1.5",
             train::number_text(d.ofi_signal)),
      option("persistence", Kind::number,
             "probability that a regime persists from one bar to the next", "-0.5",
             train::number_text(d.persistence)),
      option("jump-probability", Kind::number, "probability of a jump per bar", "2",
             train::number_text(d.jump_probability)),
      symbols,
  };
  return t;
}

SynthRequest synth_request(const Given& given) {
  check(table("synth"), given);
  SynthRequest r;
  data::SynthConfig& c = r.config;
  if (given.has("bars"))
    c.bars = whole(given.text("bars"));
  if (given.has("seed"))
    c.seed = whole(given.text("seed"));
  if (given.has("start")) {
    const auto start = data::parse_iso8601_ms(given.text("start"));
    if (!start) {
      throw InputError(field("start") + ": cannot parse '" + given.text("start") +
                       "' as an ISO-8601 date");
    }
    c.start_ms = *start;
  }
  if (given.has("interval-seconds")) {
    const double ms = std::round(number(given.text("interval-seconds")) * 1000.0);
    c.interval_ms = ms >= 1.0 && ms < 9.2e18 ? static_cast<std::int64_t>(ms) : 0;
  }
  if (given.has("initial-price"))
    c.initial_price = number(given.text("initial-price"));
  if (given.has("ofi-signal"))
    c.ofi_signal = number(given.text("ofi-signal"));
  if (given.has("persistence"))
    c.persistence = number(given.text("persistence"));
  if (given.has("jump-probability"))
    c.jump_probability = number(given.text("jump-probability"));
  if (given.has("symbols"))
    c.symbols = whole(given.text("symbols"));
  data::check(c);
  return r;
}

Table report_table() {
  Table t;
  t.command = "report";
  t.summary =
      "write one self-contained HTML report of a training run (the best policy against the "
      "built-in policies on the validation window, the training curves and the metrics) or of "
      "a sweep (every member's validation Sharpe over its epochs, each swept setting against "
      "it, the leaderboards and the best member against buy-and-hold)";
  Option run = option("run", Kind::text,
                      "run directory written by dqntrader train, or sweep directory written by "
                      "dqntrader sweep",
                      "{file}");
  run.required = true;
  run.positional = true;
  t.options = {
      run,
      option("out", Kind::text, "HTML file to write ('-' for standard output)", "{dir}",
             "RUN/report.html"),
      option("data", Kind::text,
             "the run's (the sweep's) bar file, when it has moved since training (it must hold "
             "the same bars)",
             "{dir}"),
  };
  return t;
}

ReportRequest report_request(const Given& given) {
  check(table("report"), given);
  ReportRequest r;
  r.run = given.text("run");
  if (!std::filesystem::is_directory(r.run)) {
    throw InputError("report: " + (r.run.empty() ? std::string("an empty path") : r.run) +
                     " is not a directory (a run's or a sweep's)");
  }
  r.out = given.text("out", r.run + "/report.html");
  check_output("out", r.out);
  r.data = given.text("data");
  if (given.has("data"))
    check_input("data", r.data);
  return r;
}

}  // namespace dqntrader::request
