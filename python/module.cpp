// dqntrader._core: the library's entry points for Python, the same functions `dqntrader` calls
// (the package dqntrader/__init__.py wraps them with keyword arguments, NumPy and pandas).
// Kokkos starts at the first call and is finalized at the interpreter's exit; one call at a
// time, from the thread that made the first; the GIL is released while the library works, and
// a training run or sweep asks Python for signals between steps (Ctrl-C stops it there).
#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <Kokkos_Core.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <ostream>
#include <streambuf>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "backends/execution.hpp"
#include "backends/gemm.hpp"
#include "dqntrader/core/error.hpp"
#include "dqntrader/core/init_check.hpp"
#include "dqntrader/core/kokkos_compat.hpp"
#include "dqntrader/core/version.hpp"
#include "dqntrader/data/bar_cache.hpp"
#include "dqntrader/data/csv_reader.hpp"
#include "dqntrader/data/features.hpp"
#include "dqntrader/data/synthetic.hpp"
#include "dqntrader/data/timestamp.hpp"
#include "dqntrader/data/validate.hpp"
#include "dqntrader/dist/dist.hpp"
#include "dqntrader/eval/backtest_run.hpp"
#include "dqntrader/eval/decisions.hpp"
#include "dqntrader/eval/metrics_json.hpp"
#include "dqntrader/eval/policy_file.hpp"
#include "dqntrader/io/atomic_file.hpp"
#include "dqntrader/report/report.hpp"
#include "dqntrader/request/requests.hpp"
#include "dqntrader/sweep/leaderboard.hpp"
#include "dqntrader/sweep/sweep_start.hpp"
#include "dqntrader/train/run_data.hpp"
#include "dqntrader/train/training_run.hpp"

namespace py = pybind11;
using namespace dqntrader;

namespace {

// ---- Kokkos's lifetime and one call at a time ---------------------------------------------

struct Runtime {
  std::mutex busy;
  bool started = false, finished = false;
  std::atomic<bool> stopping{
      false};  // the interpreter exits: a running call stops at its next step
  std::thread::id owner;
  compat::InitOptions options;
};

Runtime& runtime() {
  static Runtime r;
  return r;
}

// Held for the whole of a call into the library: Kokkos up (started at the first call, from
// this thread), the call the only one. RuntimeError for a second thread or a concurrent call.
class Call {
 public:
  Call() : m_lock(runtime().busy, std::try_to_lock) {
    Runtime& r = runtime();
    if (!m_lock.owns_lock())
      throw std::runtime_error("dqntrader is busy with another call: one call at a time");
    if (r.finished)
      throw std::runtime_error("dqntrader has been shut down (the interpreter is exiting)");
    if (!r.started) {
      r.options.disable_warnings = true;
      compat::initialize(r.options);
      r.started = true;
      r.owner = std::this_thread::get_id();
    } else if (r.owner != std::this_thread::get_id()) {
      throw std::runtime_error(
          "dqntrader is called from a thread other than the one that first used it; Kokkos "
          "runs its work from that thread only: call dqntrader from one thread");
    }
  }

 private:
  std::unique_lock<std::mutex> m_lock;
};

// ---- Python signals and output from inside the library -------------------------------------

// A stream whose lines go to a Python callable (or nowhere), a whole line at a time. An
// exception the callable raises is kept (the lines after it are dropped) and raised when the
// call returns; the call stops at its next step (StopCheck).
class LineSink : public std::streambuf {
 public:
  explicit LineSink(py::object target) : m_target(std::move(target)) {}
  ~LineSink() override {
    py::gil_scoped_acquire gil;
    m_error = nullptr;
    m_target = py::object();
  }

  bool failed() const { return m_error != nullptr; }
  /// Raises what the callable raised, if it did (with the GIL held).
  void raise_kept() {
    if (m_error)
      std::rethrow_exception(std::exchange(m_error, nullptr));
  }

 protected:
  int overflow(int c) override {
    if (c == traits_type::eof())
      return 0;
    if (c == '\n' || c == '\r') {
      flush_line();
    } else {
      m_line.push_back(static_cast<char>(c));
    }
    return c;
  }

 private:
  void flush_line() {
    if (m_line.empty() || m_target.is_none() || m_error) {
      m_line.clear();
      return;
    }
    py::gil_scoped_acquire gil;
    try {
      m_target(m_line);
    } catch (...) {
      m_error = std::current_exception();
    }
    m_line.clear();
  }
  py::object m_target;
  std::string m_line;
  std::exception_ptr m_error;
};

// Whether a call should stop at its next step: Python has a pending signal (Ctrl-C, asked for
// at most every 50 ms with the GIL taken), the log's callable raised, or the interpreter is
// exiting (finalize() waits for the call).
class StopCheck {
 public:
  explicit StopCheck(const LineSink* sink = nullptr) : m_sink(sink) {}
  bool operator()() {
    if (m_raised || (m_sink != nullptr && m_sink->failed()) || runtime().stopping)
      return true;
    const auto now = std::chrono::steady_clock::now();
    if (now - m_last < std::chrono::milliseconds(50))
      return false;
    m_last = now;
    py::gil_scoped_acquire gil;
    m_raised = PyErr_CheckSignals() != 0;
    return m_raised;
  }
  bool raised() const { return m_raised; }

 private:
  const LineSink* m_sink;
  bool m_raised = false;
  std::chrono::steady_clock::time_point m_last{};
};

// Runs work with the GIL released on a stream of its own, asked between steps whether to stop
// (StopCheck): KeyboardInterrupt, or what the log's callable or a callback raised, comes out,
// with the library's Interrupted swallowed.
template <class Work>
auto run_released(Work&& work, LineSink* sink = nullptr) {
  StopCheck check(sink);
  try {
    auto result = [&] {
      py::gil_scoped_release release;
      exec::StreamSpace stream;
      return work(stream.space(), check);
    }();
    if (sink != nullptr)
      sink->raise_kept();
    return result;
  } catch (const Interrupted&) {
    if (sink != nullptr)
      sink->raise_kept();
    if (check.raised())
      throw py::error_already_set();
    throw;
  }
}

// ---- conversions ---------------------------------------------------------------------------

py::object json_to_python(const nlohmann::json& j) {
  return py::module_::import("json").attr("loads")(j.dump());
}

py::array_t<double> array_of(const std::vector<double>& v) {
  return py::array_t<double>(static_cast<py::ssize_t>(v.size()), v.data());
}

std::vector<double> doubles(const py::array_t<double, py::array::c_style | py::array::forcecast>& a,
                            std::size_t n, const std::string& name) {
  if (a.ndim() != 1 || static_cast<std::size_t>(a.shape(0)) != n) {
    throw InputError("column '" + name + "' holds " + std::to_string(a.size()) +
                     " values; the timestamps are " + std::to_string(n));
  }
  return std::vector<double>(a.data(), a.data() + n);
}

// ---- bars ------------------------------------------------------------------------------------

using BarsPtr = std::shared_ptr<data::Bars>;

BarsPtr bars_from_columns(
    const std::string& source,
    const py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>& timestamp_ms,
    const py::array_t<double, py::array::c_style | py::array::forcecast>& open,
    const py::array_t<double, py::array::c_style | py::array::forcecast>& high,
    const py::array_t<double, py::array::c_style | py::array::forcecast>& low,
    const py::array_t<double, py::array::c_style | py::array::forcecast>& close,
    const std::optional<py::array_t<double, py::array::c_style | py::array::forcecast>>& volume,
    const std::optional<py::array_t<double, py::array::c_style | py::array::forcecast>>& ofi,
    const std::vector<
        std::pair<std::string, py::array_t<double, py::array::c_style | py::array::forcecast>>>&
        extra) {
  auto bars = std::make_shared<data::Bars>();
  bars->source = source;
  if (timestamp_ms.ndim() != 1)
    throw InputError(source, 0, 0, "the timestamps must be one column");
  const std::size_t n = static_cast<std::size_t>(timestamp_ms.shape(0));
  if (n == 0)
    throw InputError(source, 0, 0, "no bars");
  bars->timestamp_ms.assign(timestamp_ms.data(), timestamp_ms.data() + n);
  bars->open = doubles(open, n, "open");
  bars->high = doubles(high, n, "high");
  bars->low = doubles(low, n, "low");
  bars->close = doubles(close, n, "close");
  if (volume)
    bars->volume = doubles(*volume, n, "volume");
  if (ofi)
    bars->ofi = doubles(*ofi, n, "ofi");
  for (const auto& [name, values] : extra)
    bars->extra.push_back({name, doubles(values, n, name)});
  data::check_bars(*bars);
  return bars;
}

py::array_t<std::int64_t> bars_timestamps(const data::Bars& b) {
  return py::array_t<std::int64_t>(static_cast<py::ssize_t>(b.size()), b.timestamp_ms.data());
}

// One value column by its name (a price, volume, ofi or an extra one), or None.
py::object bars_column(const data::Bars& b, const std::string& name) {
  const std::vector<double>* values = name == "open"     ? &b.open
                                      : name == "high"   ? &b.high
                                      : name == "low"    ? &b.low
                                      : name == "close"  ? &b.close
                                      : name == "volume" ? &b.volume
                                      : name == "ofi"    ? &b.ofi
                                                         : nullptr;
  for (const data::NamedColumn& c : b.extra) {
    if (values == nullptr && c.name == name)
      values = &c.values;
  }
  if (values == nullptr || values->empty())
    return py::none();
  return array_of(*values);
}

// The value columns by name (the timestamps are bars_timestamps()).
py::dict bars_columns(const data::Bars& b) {
  py::dict out;
  out["open"] = array_of(b.open);
  out["high"] = array_of(b.high);
  out["low"] = array_of(b.low);
  out["close"] = array_of(b.close);
  if (b.has_volume())
    out["volume"] = array_of(b.volume);
  if (b.has_ofi())
    out["ofi"] = array_of(b.ofi);
  for (const data::NamedColumn& c : b.extra)
    out[py::str(c.name)] = array_of(c.values);
  return out;
}

// ---- training and sweeps ---------------------------------------------------------------------

// What the package's function gave: each option's texts by the option's name (the table's
// spelling, with - for _), as dqntrader/__init__.py makes them from its keyword arguments.
request::Given given_of(const py::dict& arguments) {
  request::Given given;
  for (const auto& [name, values] : arguments) {
    for (const py::handle& value : values)
      given.add(name.cast<std::string>(), value.cast<std::string>());
  }
  return given;
}

// The tables the package makes its functions' keyword arguments and help from.
py::list tables() {
  py::list out;
  for (const request::Table& t : request::tables()) {
    py::list options;
    for (const request::Option& o : t.options) {
      py::dict d;
      d["name"] = o.name;
      d["help"] = spelled(request::help_line(o), Spelling::python);
      d["kind"] = o.kind == request::Kind::text     ? "text"
                  : o.kind == request::Kind::list   ? "list"
                  : o.kind == request::Kind::whole  ? "whole"
                  : o.kind == request::Kind::number ? "number"
                  : o.kind == request::Kind::flag   ? "flag"
                                                    : "choice";
      d["default"] = o.default_text;
      d["choices"] = o.choices;
      d["repeatable"] = o.repeatable;
      d["required"] = o.required;
      d["positional"] = o.positional;
      d["setting"] = o.setting;
      d["refused"] = o.refused;
      options.append(d);
    }
    py::list exclusions;
    for (const request::Exclusion& e : t.exclusions)
      exclusions.append(py::make_tuple(e.option, e.other));
    py::dict d;
    d["command"] = t.command;
    d["summary"] = spelled(t.summary, Spelling::python);
    d["options"] = options;
    d["exclusions"] = exclusions;
    out.append(d);
  }
  return out;
}

// A training run (request::train_request); the run's result.
py::dict train_run(const py::dict& arguments, py::object progress, py::object log) {
  Call call;
  const request::TrainRequest r = request::train_request(given_of(arguments));
  LineSink sink(log);
  std::ostream out(&sink);
  const train::RunResult result = run_released(
      [&](const ExecSpace& space, StopCheck& check) {
        train::RunHooks hooks;
        hooks.interrupted = [&check] { return check(); };
        if (!progress.is_none()) {
          hooks.on_epoch = [&progress](std::size_t epoch, std::size_t epochs) {
            py::gil_scoped_acquire gil;
            progress(epoch, epochs);
          };
        }
        return train::run_training(space, r.config, out, train::ResumeOptions{r.resume, r.force},
                                   hooks);
      },
      &sink);
  py::dict d;
  d["out"] = r.config.out;
  d["epochs"] = result.epochs;
  d["best_epoch"] = result.best_epoch;
  d["best_sharpe"] = result.best_sharpe;
  d["last_sharpe"] = result.last_sharpe;
  d["stopped_early"] = result.stopped_early;
  return d;
}

// A sweep as `dqntrader sweep` plans and runs it (request::sweep_request); its directory.
std::string sweep_run(const py::dict& arguments, py::object log) {
  Call call;
  request::SweepRequest r = request::sweep_request(given_of(arguments));
  LineSink sink(log);
  std::ostream out(&sink);
  const bool resume = !r.resume.empty();
  const sweep::SweepPlan plan =
      resume ? sweep::reopen_sweep(r.resume, out) : sweep::plan_sweep(std::move(r.plan));
  const sweep::SweepPlan done = run_released(
      [&](const ExecSpace& space, StopCheck& check) {
        return dist::run_whole_sweep(space, plan, resume, out, [&check] { return check(); });
      },
      &sink);
  return done.directory;
}

// A report of a run's or a sweep's directory (request::report_request), written to its out;
// the path written.
std::string report_run(const py::dict& arguments, py::object log) {
  Call call;
  const request::ReportRequest r = request::report_request(given_of(arguments));
  LineSink sink(log);
  std::ostream out(&sink);
  const std::string html =
      run_released([&](const ExecSpace& space,
                       StopCheck&) { return report::render_report(space, r.run, r.data, out); },
                   &sink);
  if (r.out == "-") {
    py::module_::import("sys").attr("stdout").attr("write")(html);
  } else {
    io::write_file_atomically(r.out, html);
  }
  return r.out;
}

// Instruments held in memory (by symbol), or, when none are, every instrument of the data's
// files (the one columns.symbol chooses, when given): what backtest and act decide on.
template <class Files>
data::Panel panel_of(const std::vector<std::pair<std::string, BarsPtr>>& in_memory,
                     const Files& files, const data::BarSelection& columns) {
  if (in_memory.empty())
    return data::load_panel(files, columns);
  data::Panel panel;
  for (const auto& [symbol, bars] : in_memory) {
    panel.symbols.push_back(symbol);
    panel.instruments.push_back(*bars);
  }
  return panel;
}

// ---- backtests ------------------------------------------------------------------------------

// A backtest (request::backtest_request) of instruments held in memory (by symbol; one of an
// empty symbol is a single instrument), or, when none are, of every instrument of the data's
// file (the one its symbol chooses, when given).
py::dict backtest(const std::vector<std::pair<std::string, BarsPtr>>& in_memory,
                  const py::dict& arguments) {
  Call call;
  request::BacktestRequest r = request::backtest_request(
      given_of(arguments), in_memory.empty() ? request::BarsFrom::path : request::BarsFrom::memory);
  r.run.paths = true;
  eval::BacktestPolicies files = eval::read_backtest_policies(r.weights);
  files.columns.symbol = r.symbol;
  const data::Panel panel = panel_of(in_memory, r.data, files.columns);
  const std::vector<eval::BacktestResult> results =
      run_released([&](const ExecSpace& space, StopCheck&) {
        return eval::run_backtest(space, panel, files, r.run);
      });
  py::list paths;
  for (std::size_t s = 0; s < panel.size(); ++s) {
    const eval::BacktestResult& result = results[s];
    const data::Bars& bars = panel.instruments[s];
    for (std::size_t w = 0; w < result.windows.size(); ++w) {
      for (std::size_t k = 0; k < result.names.size(); ++k) {
        const eval::PathDetail& d = result.details[w][k];
        const std::size_t n = d.returns.size();
        py::array_t<std::int64_t> bar(static_cast<py::ssize_t>(n));
        py::array_t<std::int64_t> ms(static_cast<py::ssize_t>(n));
        for (std::size_t i = 0; i < n; ++i) {
          bar.mutable_at(i) = static_cast<std::int64_t>(result.windows[w].begin + i + 1);
          ms.mutable_at(i) = bars.timestamp_ms[result.windows[w].begin + i + 1];
        }
        py::dict path;
        if (panel.size() > 1)
          path["symbol"] = panel.symbols[s];
        path["policy"] = result.names[k];
        path["window"] = w + 1;
        path["bar"] = bar;
        path["timestamp_ms"] = ms;
        path["position"] = py::array_t<double>(static_cast<py::ssize_t>(n), d.positions.data());
        path["return"] = array_of(d.returns);
        path["equity"] = py::array_t<double>(static_cast<py::ssize_t>(n), d.equity.data() + 1);
        paths.append(path);
      }
    }
  }
  py::dict out;
  out["metrics"] = json_to_python(eval::to_json(panel, results));
  out["paths"] = paths;
  return out;
}

// ---- policies -----------------------------------------------------------------------------

struct Policy {
  std::string path;
  eval::PolicyFile file;
};

std::shared_ptr<Policy> load_policy(const std::string& path) {
  auto p = std::make_shared<Policy>();
  p->path = sweep::policy_path(path);
  p->file = eval::read_policy(p->path);
  return p;
}

// The policy's decisions (request::act_request; weights is the policy's file) on instruments
// held in memory (by symbol; one of an empty symbol is a single instrument), or, when none are,
// on every instrument of the data's file (the one its symbol chooses, when given): one row per
// decision, of several instruments every one's in order, with a symbol column.
py::dict act(const Policy& policy, const std::vector<std::pair<std::string, BarsPtr>>& in_memory,
             const py::dict& arguments) {
  Call call;
  const request::ActRequest r = request::act_request(
      given_of(arguments), in_memory.empty() ? request::BarsFrom::path : request::BarsFrom::memory);
  const eval::PolicyFile& file = policy.file;
  const std::size_t incoming = eval::position_index(r.position, file.positions);
  data::BarSelection columns;
  columns.names = file.features.extra;
  columns.symbol = r.symbol;
  const data::Panel panel = panel_of(in_memory, r.data, columns);
  const std::vector<std::vector<eval::Decision>> made =
      run_released([&](const ExecSpace& space, StopCheck&) {
        eval::PolicyDecisions decisions(space, file.network, file.features, file.stats,
                                        file.positions, file.parameters, r.precision, r.chunk_bars);
        return decisions.decide(panel, r.start, r.end, incoming);
      });
  std::size_t n = 0;
  for (const std::vector<eval::Decision>& m : made)
    n += m.size();
  const std::size_t actions = file.positions.size();
  py::array_t<std::int64_t> bar(static_cast<py::ssize_t>(n)), ms(static_cast<py::ssize_t>(n)),
      action(static_cast<py::ssize_t>(n));
  py::array_t<double> in(static_cast<py::ssize_t>(n)), pos(static_cast<py::ssize_t>(n));
  py::array_t<float> q({static_cast<py::ssize_t>(n), static_cast<py::ssize_t>(actions)});
  py::list symbols;
  std::size_t i = 0;
  for (std::size_t s = 0; s < panel.size(); ++s) {
    for (const eval::Decision& d : made[s]) {
      bar.mutable_at(i) = static_cast<std::int64_t>(d.bar);
      ms.mutable_at(i) = panel.instruments[s].timestamp_ms[d.bar];
      action.mutable_at(i) = static_cast<std::int64_t>(d.action);
      in.mutable_at(i) = d.incoming;
      pos.mutable_at(i) = d.position;
      for (std::size_t a = 0; a < actions; ++a)
        q.mutable_at(i, a) = d.q[a];
      symbols.append(panel.symbols[s]);
      ++i;
    }
  }
  py::dict out;
  if (panel.size() > 1)
    out["symbol"] = symbols;
  out["bar"] = bar;
  out["timestamp_ms"] = ms;
  out["incoming"] = in;
  out["q"] = q;
  out["action"] = action;
  out["position"] = pos;
  return out;
}

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "dqntrader's library entry points (use the package dqntrader, which wraps them)";
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p)
        std::rethrow_exception(p);
    } catch (const InputError& e) {
      PyErr_SetString(PyExc_ValueError, spelled(e.message(), Spelling::python).c_str());
    } catch (const Error& e) {
      PyErr_SetString(PyExc_RuntimeError, spelled(e.message(), Spelling::python).c_str());
    }
  });

  m.def("configure", [](long long threads, long long device) {
    Runtime& r = runtime();
    if (r.started)
      throw std::runtime_error("dqntrader has started already: configure() comes first");
    r.options = init_options(threads, device, "threads=", "device=");
  });
  // At the interpreter's exit (atexit): a call running in another thread (a daemon thread's)
  // is asked to stop at its next step and waited for with the GIL released, since it may need
  // the GIL to get there; then the device is released.
  m.def("finalize", [] {
    Runtime& r = runtime();
    r.stopping = true;
    py::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(r.busy);
    if (r.started && !r.finished)
      Kokkos::finalize();
    r.finished = true;
  });
  m.def("info", [] {
    Call call;
    py::dict d;
    d["version"] = DQNTRADER_VERSION;
    d["revision"] = DQNTRADER_GIT_REVISION;
    d["backend"] = std::string(gemm::backend_name());
    d["products"] = gemm::library_description();
    d["kokkos"] = compat::kokkos_version_string();
    d["execution_space"] = std::string(ExecSpace::name());
    d["concurrency"] = ExecSpace().concurrency();
#if defined(DQNTRADER_WITH_ONNX)
    d["onnx_export"] = true;
#else
    d["onnx_export"] = false;
#endif
    return d;
  });
  m.def("settings", [] {
    train::TrainConfig defaults;
    py::list out;
    for (const train::Setting& s : train::settings(defaults)) {
      py::dict d;
      d["name"] = s.name;
      d["default"] = s.documented_default.empty() ? s.get() : s.documented_default;
      d["help"] = spelled(s.help, Spelling::python);
      d["kind"] = s.is_flag ? "flag" : s.is_list ? "list" : s.is_number ? "number" : "text";
      out.append(d);
    }
    return out;
  });

  py::class_<data::Bars, BarsPtr>(m, "Bars")
      .def_static("from_columns", &bars_from_columns)
      .def_static("from_file",
                  [](const std::string& path, const std::vector<std::string>& columns,
                     const std::vector<std::string>& prefixes, const std::string& symbol) {
                    data::check_symbol("symbol", symbol);
                    data::BarSelection selection{columns, prefixes, symbol};
                    return BarsPtr(std::make_shared<data::Bars>(data::load_bars(path, selection)));
                  })
      .def_static("panel_from_file",
                  [](const std::string& path, const std::vector<std::string>& columns,
                     const std::vector<std::string>& prefixes) {
                    data::BarSelection selection{columns, prefixes, ""};
                    data::Panel panel = data::load_panel(path, selection);
                    std::vector<std::pair<std::string, BarsPtr>> out;
                    for (std::size_t s = 0; s < panel.size(); ++s) {
                      out.emplace_back(panel.symbols[s], std::make_shared<data::Bars>(
                                                             std::move(panel.instruments[s])));
                    }
                    return out;
                  })
      .def_static("synth",
                  [](const py::dict& arguments) {
                    const request::SynthRequest r = request::synth_request(given_of(arguments));
                    const data::SynthPanel panel = data::synth_panel(r.config);
                    py::list out;
                    for (std::size_t i = 0; i < panel.bars.size(); ++i)
                      out.append(py::make_tuple(panel.symbols[i],
                                                std::make_shared<data::Bars>(panel.bars[i])));
                    return out;
                  })
      .def("__len__", &data::Bars::size)
      .def_readonly("source", &data::Bars::source)
      .def_property_readonly(
          "fingerprint",
          [](const data::Bars& b) { return train::fingerprint_text(data::fingerprint(b)); })
      .def("timestamps", &bars_timestamps)
      .def("column", &bars_column)
      .def("columns", &bars_columns)
      .def("slice",
           [](const data::Bars& b, std::size_t begin, std::size_t end) {
             if (!(begin < end && end <= b.size())) {
               throw InputError("slice(" + std::to_string(begin) + ", " + std::to_string(end) +
                                "): the bars are 0 .. " + std::to_string(b.size()) +
                                " and a slice holds at least one (begin < end <= " +
                                std::to_string(b.size()) + ")");
             }
             return BarsPtr(std::make_shared<data::Bars>(data::bars_between(b, begin, end)));
           })
      .def("save", [](const data::Bars& b, const std::string& path) {
        if (data::is_bar_cache_path(path))
          data::write_bar_cache(path, b);
        else
          data::write_bars_csv(path, b);
      });

  // Integer timestamps as the CSV reader reads them: seconds or milliseconds by the first
  // value's magnitude (data::epoch_form).
  m.def("epoch_milliseconds",
        [](const py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>& values) {
          const std::size_t n = static_cast<std::size_t>(values.size());
          py::array_t<std::int64_t> out(static_cast<py::ssize_t>(n));
          if (n == 0)
            return out;
          const data::TimestampForm form = data::epoch_form(values.data()[0]);
          for (std::size_t i = 0; i < n; ++i) {
            const std::optional<std::int64_t> ms = data::epoch_ms(values.data()[i], form);
            if (!ms) {
              throw InputError("timestamp " + std::to_string(values.data()[i]) + " of bar " +
                               std::to_string(i) + " is out of range as epoch seconds");
            }
            out.mutable_at(i) = *ms;
          }
          return out;
        });
  m.def("tables", &tables);
  m.def("train", &train_run);
  m.def("sweep", &sweep_run);
  m.def("backtest", &backtest);
  m.def("report", &report_run);

  py::class_<Policy, std::shared_ptr<Policy>>(m, "Policy")
      .def_readonly("path", &Policy::path)
      .def_property_readonly("positions", [](const Policy& p) { return p.file.positions; })
      .def_property_readonly("network",
                             [](const Policy& p) { return nn::describe(p.file.network); })
      .def_property_readonly("warmup", [](const Policy& p) { return p.file.features.warmup(); })
      .def_property_readonly("info", [](const Policy& p) { return json_to_python(p.file.info); })
      .def("act", &act)
#if defined(DQNTRADER_WITH_ONNX)
      .def("export_onnx",
           [](const Policy& p, const py::dict& arguments) {
             const request::ExportRequest r = request::export_request(given_of(arguments));
             if (r.onnx == "-")
               throw InputError(field("onnx") + ": the module writes the model to a file");
             eval::write_onnx_model(r.onnx, p.file, p.path, r.inputs);
           })
#endif
      ;
  m.def("load_policy", &load_policy);
}
