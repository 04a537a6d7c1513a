// dqntrader act: a trained policy's decision for the latest bar of a file, one per bar of a
// window, or one per bar as bars arrive (--follow), on the backtest's device path
// (eval::PolicyDecisions). docs/POLICY.md defines the decision.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dqntrader/cli/commands.hpp"
#include "dqntrader/core/error.hpp"
#include "dqntrader/data/bar_cache.hpp"
#include "dqntrader/data/csv_reader.hpp"
#include "dqntrader/data/features.hpp"
#include "dqntrader/data/timestamp.hpp"
#include "dqntrader/eval/backtest_config.hpp"
#include "dqntrader/eval/decisions.hpp"
#include "dqntrader/eval/policy_file.hpp"
#include "dqntrader/io/json_values.hpp"
#include "dqntrader/request/requests.hpp"
#include "dqntrader/sweep/leaderboard.hpp"

namespace dqntrader::cli {

namespace {

// Set by SIGINT and SIGTERM: a stream being followed ends cleanly at the next line boundary.
volatile sig_atomic_t g_stop = 0;

void request_stop(int) {
  g_stop = 1;
}

// SIGINT and SIGTERM end --follow with exit 0: the handlers interrupt a blocking read (no
// SA_RESTART) and the loop sees the flag.
void catch_stop_signals() {
  struct sigaction action {};
  action.sa_handler = request_stop;
  sigemptyset(&action.sa_mask);
  action.sa_flags = 0;
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

std::string position_name(double p) {
  if (p == 0.0)
    return "flat";
  if (p == 1.0)
    return "long";
  if (p == -1.0)
    return "short";
  return (p > 0 ? "+" : "") + io::format_metric(p);
}

// One decision as one line of JSON: {"bar", "timestamp", "incoming", "q", "action",
// "position"} (led by "symbol" where one is given: an instrument of several), every number in
// its shortest form that reads back as the same value (a Q-value as the same float). Written
// directly: a window's million lines are a large part of its time otherwise.
void append_record(std::string& out, const eval::Decision& d, std::size_t bar, std::int64_t ms,
                   const std::string& symbol = {}) {
  char number[64];
  auto add = [&](auto value) {
    const auto end = std::to_chars(number, number + sizeof number, value).ptr;
    out.append(number, end);
  };
  out += symbol.empty() ? "{\"bar\":" : "{\"symbol\":\"" + symbol + "\",\"bar\":";
  add(bar);
  out += ",\"timestamp\":\"" + data::format_iso8601_ms(ms) + "\",\"incoming\":";
  add(d.incoming);
  out += ",\"q\":[";
  for (std::size_t a = 0; a < d.q.size(); ++a) {
    if (a > 0)
      out += ',';
    add(d.q[a]);
  }
  out += "],\"action\":";
  add(d.action);
  out += ",\"position\":";
  add(d.position);
  out += "}\n";
}

// The bars of --data: a file (CSV or .dqnbars) or standard input (CSV) read to its end.
data::Bars read_all(const std::string& path, const data::BarSelection& columns) {
  if (path != "-")
    return data::load_bars(path, columns);
  data::CsvBarParser parser("standard input", columns);
  std::string line;
  while (std::getline(std::cin, line))
    parser.line(line);
  parser.finish();
  return parser.bars();
}

// A table of decisions, a row each: of a panel of several, every instrument's, led by its
// symbol.
void print_table(const std::vector<std::vector<eval::Decision>>& made, const data::Panel& panel,
                 const std::vector<double>& positions) {
  const bool symbols = panel.size() > 1;
  std::size_t width = 6;
  for (const std::string& symbol : panel.symbols)
    width = std::max(width, symbol.size());
  if (symbols)
    std::printf("%-*s  ", static_cast<int>(width), "symbol");
  std::printf("%8s  %-24s  %8s", "bar", "timestamp", "incoming");
  for (double p : positions)
    std::printf("  %12s", ("Q " + position_name(p)).c_str());
  std::printf("  %8s\n", "position");
  for (std::size_t s = 0; s < panel.size(); ++s) {
    for (const eval::Decision& d : made[s]) {
      if (symbols)
        std::printf("%-*s  ", static_cast<int>(width), panel.symbols[s].c_str());
      std::printf("%8zu  %-24s  %8s", d.bar,
                  data::format_iso8601_ms(panel.instruments[s].timestamp_ms[d.bar]).c_str(),
                  position_name(d.incoming).c_str());
      for (float q : d.q)
        std::printf("  %12.6g", static_cast<double>(q));
      std::printf("  %8s\n", position_name(d.position).c_str());
    }
  }
}

// Writes to standard output as a whole; Error naming it when it cannot (a full disk, a file
// size limit, a closed pipe whose SIGPIPE is ignored).
void write_stdout(const std::string& text, bool flush) {
  if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() ||
      (flush && std::fflush(stdout) != 0)) {
    throw Error(std::string("cannot write to standard output: ") + std::strerror(errno));
  }
}

// Where a followed stream's rows come from, as it is opened: standard input and a FIFO end at
// their end; a regular file is followed as it grows, until a signal.
class FollowedInput {
 public:
  explicit FollowedInput(const std::string& path) : m_path(path) {
    if (path != "-") {
      m_fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (m_fd < 0)
        throw InputError(path, 0, 0, std::string("cannot open: ") + std::strerror(errno));
    }
    struct stat info {};
    m_grows = path != "-" && ::fstat(m_fd, &info) == 0 && S_ISREG(info.st_mode);
    if (m_grows) {
      m_device = info.st_dev;
      m_inode = info.st_ino;
      // Woken when the file changes (or, where inotify is unavailable, every 50 ms).
      m_watch = ::inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
      if (m_watch >= 0 && ::inotify_add_watch(m_watch, path.c_str(),
                                              IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE |
                                                  IN_MOVE_SELF | IN_DELETE_SELF) < 0) {
        ::close(m_watch);
        m_watch = -1;
      }
    }
  }
  FollowedInput(const FollowedInput&) = delete;
  FollowedInput& operator=(const FollowedInput&) = delete;
  ~FollowedInput() {
    if (m_fd > 0)
      ::close(m_fd);
    if (m_watch >= 0)
      ::close(m_watch);
  }

  int fd() const { return m_fd; }
  /// A regular file, read as it grows; standard input and a FIFO end instead.
  bool grows() const { return m_grows; }

  /// Waits until a grown file may have more bytes past offset, or a second has passed, or a
  /// signal came. InputError when the file was truncated below offset, or its path was
  /// removed or names another file now: a followed file only grows.
  void wait(std::uint64_t offset) {
    if (m_watch >= 0) {
      pollfd watched{m_watch, POLLIN, 0};
      if (::poll(&watched, 1, 1000) > 0) {
        char events[4096];
        while (::read(m_watch, events, sizeof events) > 0) {
        }
      }
    } else {
      ::poll(nullptr, 0, 50);
    }
    struct stat open {
    }, named{};
    if (::fstat(m_fd, &open) == 0 && static_cast<std::uint64_t>(open.st_size) < offset) {
      throw InputError(m_path, 0, 0,
                       "truncated while followed (" + std::to_string(offset) + " bytes read, " +
                           std::to_string(open.st_size) +
                           " there now): --follow reads a file that only grows; start act "
                           "again on the file as it is");
    }
    if (::stat(m_path.c_str(), &named) != 0 || named.st_dev != m_device ||
        named.st_ino != m_inode) {
      throw InputError(m_path, 0, 0,
                       "removed or replaced while followed (after " + std::to_string(offset) +
                           " bytes): --follow reads one file as it grows; start act again on "
                           "the new file");
    }
  }

 private:
  std::string m_path;
  int m_fd = 0;  // standard input for "-"
  bool m_grows = false;
  dev_t m_device = 0;
  ino_t m_inode = 0;
  int m_watch = -1;
};

// Lines from a followed input into a parser, as they come: a line counts once its end has
// arrived (a partial last line waits), except at the end of a stream that ends.
class LineStream {
 public:
  LineStream(FollowedInput& input, data::CsvBarParser& parser) : m_input(input), m_parser(parser) {}

  // Reads what there is; each line that adds a bar is answered by on_bar(). Returns at the
  // end of what is there now (wait = false) or of the stream (wait = true: a growing file is
  // then followed until a signal), or on a signal.
  void pump(bool wait, const std::function<void()>& on_bar) {
    char buffer[1 << 16];
    while (!g_stop) {
      const ssize_t got = ::read(m_input.fd(), buffer, sizeof buffer);
      if (got < 0) {
        if (errno == EINTR)
          continue;
        throw Error(std::string("cannot read the bars: ") + std::strerror(errno));
      }
      if (got == 0) {
        if (!wait)
          return;
        if (!m_input.grows()) {
          if (!m_pending.empty() && m_parser.line(m_pending))
            on_bar();
          m_pending.clear();
          return;
        }
        m_input.wait(m_offset);
        continue;
      }
      m_offset += static_cast<std::uint64_t>(got);
      m_pending.append(buffer, static_cast<std::size_t>(got));
      std::size_t start = 0;
      for (std::size_t end; (end = m_pending.find('\n', start)) != std::string::npos;
           start = end + 1) {
        if (m_parser.line(std::string_view(m_pending).substr(start, end - start)))
          on_bar();
        if (g_stop)
          break;
      }
      m_pending.erase(0, start);
    }
  }

 private:
  FollowedInput& m_input;
  data::CsvBarParser& m_parser;
  std::string m_pending;
  std::uint64_t m_offset = 0;  // bytes read
};

}  // namespace

Command add_act(CLI::App& app) {
  struct Presentation {
    bool json = false, follow = false;
  };
  auto flags = std::make_shared<RequestFlags>();
  auto shown = std::make_shared<Presentation>();
  Command command;
  command.app = flags->add(app, request::table("act"));
  CLI::App* c = command.app;
  c->description(c->get_description() + ", or one per bar as bars arrive (--follow)");
  c->add_flag("--json", shown->json,
              "one JSON object per decision, one per line (bar, timestamp, incoming, q, action, "
              "position)");
  c->add_flag("--follow", shown->follow,
              "after the data's latest bar, keep reading: rows appended to the file, or rows on "
              "standard input (--data -), each answered by one JSON line as soon as it is "
              "complete; ends at the end of standard input, or on SIGINT or SIGTERM, with exit 0");
  command.run = [flags, shown](const ExecSpace& space) {
    const request::ActRequest r = request::act_request(flags->given());
    if (shown->follow && (!r.start.empty() || !r.end.empty()))
      throw InputError("--follow answers the bars as they come: drop --start and --end");
    const std::string& path = r.weights;
    refuse_output_over_input("standard output", "-", {{"--weights", path}, {"--data", r.data}});
    const eval::PolicyFile policy = eval::read_policy(path);
    const std::size_t incoming = eval::position_index(r.position, policy.positions);
    eval::PolicyDecisions decisions(space, policy.network, policy.features, policy.stats,
                                    policy.positions, policy.parameters, r.precision, r.chunk_bars);
    const std::size_t warmup = decisions.warmup();
    data::BarSelection columns;
    columns.names = policy.features.extra;
    columns.symbol = r.symbol;
    if (!shown->follow) {
      // Every instrument of the data (the one --symbol chooses, when given).
      data::Panel panel;
      if (r.data == "-") {
        panel.symbols.emplace_back();
        panel.instruments.push_back(read_all(r.data, columns));
      } else {
        panel = data::load_panel(r.data, columns);
      }
      const std::vector<std::vector<eval::Decision>> made =
          decisions.decide(panel, r.start, r.end, incoming);
      const bool window = !r.start.empty() || !r.end.empty();
      if (shown->json) {
        std::string out;
        for (std::size_t s = 0; s < panel.size(); ++s) {
          const std::string symbol = panel.size() > 1 ? panel.symbols[s] : std::string();
          for (const eval::Decision& d : made[s]) {
            append_record(out, d, d.bar, panel.instruments[s].timestamp_ms[d.bar], symbol);
            if (out.size() > (1u << 20)) {
              write_stdout(out, false);
              out.clear();
            }
          }
        }
        write_stdout(out, true);
        return;
      }
      if (window || panel.size() > 1) {
        if (panel.size() > 1)
          std::printf("policy   %s (%s)\n", path.c_str(), nn::describe(policy.network).c_str());
        print_table(made, panel, policy.positions);
        return;
      }
      const data::Bars& bars = panel.instruments.front();
      const eval::Decision& d = made.front().front();
      std::printf("policy   %s (%s)\n", path.c_str(), nn::describe(policy.network).c_str());
      std::printf("bar      %zu of %s, %s; coming in %s\n", d.bar, bars.source.c_str(),
                  data::format_iso8601_ms(bars.timestamp_ms[d.bar]).c_str(),
                  position_name(d.incoming).c_str());
      std::printf("q       ");
      for (std::size_t a = 0; a < d.q.size(); ++a) {
        std::printf(" %s %.6g", position_name(policy.positions[a]).c_str(),
                    static_cast<double>(d.q[a]));
      }
      std::printf("\naction   %zu: hold %s (%s) from the next bar on\n", d.action,
                  io::format_metric(d.position).c_str(), position_name(d.position).c_str());
      return;
    }

    // --follow: each instrument's bars its decisions read are kept (warmup + 1), each new one
    // decided at as soon as its row is complete, the instrument's position carried (rows with a
    // symbol column, none chosen: every instrument on its own, each line naming its symbol). A
    // growing file is read as it is first (one decision at each instrument's latest bar), then
    // followed; standard input and a FIFO answer every row as it comes, to their end.
    catch_stop_signals();
    if (r.data != "-" && data::is_bar_cache_path(r.data))
      throw InputError("--follow reads CSV rows; " + r.data + " is a .dqnbars cache");
    FollowedInput input(r.data);
    data::CsvBarParser parser(r.data == "-" ? "standard input" : r.data, columns, true);
    LineStream stream(input, parser);
    std::vector<std::size_t> count;  // each instrument's bars read so far
    std::vector<std::size_t> held;   // the position its next decision comes in with
    bool decided = false;
    auto counted = [&] {  // the instrument of the bar just read, counted
      const std::size_t s = parser.last_instrument();
      if (count.size() <= s) {
        count.resize(s + 1, 0);
        held.resize(s + 1, incoming);
      }
      ++count[s];
      return s;
    };
    auto decide_latest = [&](std::size_t s) {
      const data::Bars& bars = parser.bars(s);
      data::check_feature_columns(policy.features, bars);
      if (bars.size() < warmup + 1)
        return;
      const eval::Decision d = decisions.decide_latest(bars, held[s]);
      held[s] = d.action;
      decided = true;
      std::string line;
      append_record(line, d, count[s] - 1, bars.timestamp_ms.back(), parser.symbol(s));
      write_stdout(line, true);
      parser.keep_last(warmup, s);  // the bars its next decision reads, with the next one
    };
    if (input.grows()) {
      stream.pump(false, [&] { counted(); });
      parser.finish();
      for (std::size_t s = 0; s < parser.instruments(); ++s) {
        data::check_feature_columns(policy.features, parser.bars(s));
        if (parser.bars(s).size() < warmup + 1)
          throw eval::too_few_bars(parser.bars(s), warmup);
        decide_latest(s);
      }
    }
    stream.pump(true, [&] { decide_latest(counted()); });
    if (!g_stop && !decided) {
      if (parser.instruments() == 0)
        parser.finish();  // rows of a symbol column, none read: says so
      throw eval::too_few_bars(parser.bars(parser.last_instrument()), warmup);
    }
  };
  return command;
}

}  // namespace dqntrader::cli
