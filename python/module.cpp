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
#include <variant>
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
#include "dqntrader/sweep/leaderboard.hpp"
#include "dqntrader/sweep/search_space.hpp"
#include "dqntrader/sweep/sweep_start.hpp"
#include "dqntrader/train/run_data.hpp"
#include "dqntrader/train/training_run.hpp"
#if defined(DQNTRADER_WITH_ONNX)
#include "dqntrader/eval/onnx_export.hpp"
#endif

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

// A training run: settings as a JSON object (the names of `dqntrader settings`), or those of
// the run in resume; the run's result as JSON text.
py::dict train_run(const std::string& settings, const std::string& resume, bool force,
                   py::object progress, py::object log) {
  Call call;
  train::TrainConfig config;
  if (!resume.empty()) {
    train::apply_settings_json(config, resume + "/config.json");
    config.out = resume;
  }
  train::apply_settings(config, nlohmann::json::parse(settings), "dqntrader.train()");
  if (!resume.empty() && config.out != resume)
    throw InputError("resume= continues the run in its own directory; drop out=");
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
        return train::run_training(space, config, out, train::ResumeOptions{!resume.empty(), force},
                                   hooks);
      },
      &sink);
  py::dict d;
  d["out"] = config.out;
  d["epochs"] = result.epochs;
  d["best_epoch"] = result.best_epoch;
  d["best_sharpe"] = result.best_sharpe;
  d["last_sharpe"] = result.last_sharpe;
  d["stopped_early"] = result.stopped_early;
  return d;
}

// A sweep as `dqntrader sweep` plans and runs it; request holds its options.
std::string sweep_run(const std::string& settings, const std::string& resume, py::dict options,
                      py::object log) {
  Call call;
  LineSink sink(log);
  std::ostream out(&sink);
  sweep::SweepPlan plan;
  if (!resume.empty()) {
    plan = sweep::reopen_sweep(resume, out);
  } else {
    sweep::SweepRequest request;
    request.base.out = "runs/sweep";
    if (options.contains("space"))
      request.space = sweep::read_space(options["space"].cast<std::string>());
    train::apply_settings(request.base, request.space.base, "space (base)");
    const nlohmann::json given = nlohmann::json::parse(settings);
    train::apply_settings(request.base, given, "dqntrader.sweep()");
    request.out_given = given.contains("out");
    if (options.contains("set"))
      request.sets = options["set"].cast<std::vector<std::string>>();
    if (options.contains("seeds"))
      request.seeds = options["seeds"].cast<std::string>();
    if (options.contains("random"))
      request.random = options["random"].cast<std::size_t>();
    if (options.contains("random_seed"))
      request.random_seed = options["random_seed"].cast<std::uint64_t>();
    if (options.contains("population"))
      request.population = options["population"].cast<std::size_t>();
    if (options.contains("pbo_blocks"))
      request.pbo_blocks = options["pbo_blocks"].cast<std::size_t>();
    sweep::ScheduleSettings& s = request.schedule;
    if (options.contains("schedule"))
      s.kind = options["schedule"].cast<std::string>();
    auto given_option = [&](const char* key, const char* flag, auto& field) {
      if (options.contains(key)) {
        field = options[key].cast<std::decay_t<decltype(field)>>();
        request.schedule_options.emplace_back(flag);
      }
    };
    given_option("pbt_interval", "pbt-interval", s.interval);
    given_option("pbt_fraction", "pbt-fraction", s.fraction);
    given_option("pbt_resample", "pbt-resample", s.resample);
    given_option("pbt_burn_in", "pbt-burn-in", s.burn_in);
    given_option("halving_rate", "halving-rate", s.halving_rate);
    given_option("halving_interval", "halving-interval", s.halving_interval);
    if (options.contains("pbt_perturb")) {
      request.perturb = options["pbt_perturb"].cast<std::string>();
      request.schedule_options.emplace_back("pbt-perturb");
    }
    plan = sweep::plan_sweep(std::move(request));
  }
  const sweep::SweepPlan done = run_released(
      [&](const ExecSpace& space, StopCheck& check) {
        return dist::run_whole_sweep(space, plan, !resume.empty(), out,
                                     [&check] { return check(); });
      },
      &sink);
  return done.directory;
}

// ---- backtests ------------------------------------------------------------------------------

// Bars given as Bars, or as a bar file's path read with the extra columns the policies need
// (as the command reads --data).
using BarsOrPath = std::variant<BarsPtr, std::string>;

BarsPtr bars_of(const BarsOrPath& given, const data::ColumnSelection& columns) {
  if (const BarsPtr* bars = std::get_if<BarsPtr>(&given))
    return *bars;
  return std::make_shared<data::Bars>(data::load_bars(std::get<std::string>(given), columns));
}

py::dict backtest(const BarsOrPath& given, const std::vector<std::string>& weights,
                  const std::vector<std::string>& policies, const std::string& start,
                  const std::string& end, std::size_t windows, std::optional<double> cost,
                  std::optional<double> bars_per_year, std::optional<double> risk_free,
                  const std::string& precision, std::optional<std::size_t> chunk_bars) {
  Call call;
  eval::BacktestRequest request;
  for (const std::string& name : policies)
    request.builtins.push_back(eval::parse_builtin_policy(name));
  request.from = start;
  request.to = end;
  request.from_name = "start=";
  request.to_name = "end=";
  request.windows_name = "windows=";
  request.windows = windows;
  request.paths = true;
  if (cost)
    request.config.cost = *cost;
  if (bars_per_year)
    request.config.bars_per_year = *bars_per_year;
  if (risk_free)
    request.config.risk_free = *risk_free;
  if (!precision.empty())
    request.config.precision = parse_precision(precision);
  if (chunk_bars)
    request.config.chunk_bars = *chunk_bars;
  const eval::BacktestPolicies files = eval::read_backtest_policies(weights);
  const BarsPtr held = bars_of(given, files.columns);
  const data::Bars& bars = *held;
  const eval::BacktestResult result = run_released([&](const ExecSpace& space, StopCheck&) {
    return eval::run_backtest(space, bars, files, request);
  });
  py::list paths;
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
  py::dict out;
  out["metrics"] = json_to_python(eval::to_json(result));
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

py::dict act(const Policy& policy, const BarsOrPath& given, const std::string& start,
             const std::string& end, const std::string& position, const std::string& precision,
             std::optional<std::size_t> chunk_bars) {
  Call call;
  const eval::PolicyFile& file = policy.file;
  const std::size_t incoming = eval::position_index("position=", position, file.positions);
  eval::BacktestConfig defaults;
  const Precision p = precision.empty() ? defaults.precision : parse_precision(precision);
  data::ColumnSelection columns;
  columns.names = file.features.extra;
  const BarsPtr held = bars_of(given, columns);
  const data::Bars& bars = *held;
  data::check_feature_columns(file.features, bars);
  const std::vector<eval::Decision> made = run_released([&](const ExecSpace& space, StopCheck&) {
    eval::PolicyDecisions decisions(space, file.network, file.features, file.stats, file.positions,
                                    file.parameters, p, chunk_bars.value_or(defaults.chunk_bars));
    const eval::DecisionWindow w =
        eval::decision_window(bars, decisions.warmup(), start, end, "start=", "end=");
    return decisions.decide(bars, w.first, w.last, incoming);
  });
  const std::size_t n = made.size(), actions = file.positions.size();
  py::array_t<std::int64_t> bar(static_cast<py::ssize_t>(n)), ms(static_cast<py::ssize_t>(n)),
      action(static_cast<py::ssize_t>(n));
  py::array_t<double> in(static_cast<py::ssize_t>(n)), pos(static_cast<py::ssize_t>(n));
  py::array_t<float> q({static_cast<py::ssize_t>(n), static_cast<py::ssize_t>(actions)});
  for (std::size_t i = 0; i < n; ++i) {
    const eval::Decision& d = made[i];
    bar.mutable_at(i) = static_cast<std::int64_t>(d.bar);
    ms.mutable_at(i) = bars.timestamp_ms[d.bar];
    action.mutable_at(i) = static_cast<std::int64_t>(d.action);
    in.mutable_at(i) = d.incoming;
    pos.mutable_at(i) = d.position;
    for (std::size_t a = 0; a < actions; ++a)
      q.mutable_at(i, a) = d.q[a];
  }
  py::dict out;
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
      d["help"] = s.help;
      d["kind"] = s.is_flag ? "flag" : s.is_list ? "list" : s.is_number ? "number" : "text";
      out.append(d);
    }
    return out;
  });

  py::class_<data::Bars, BarsPtr>(m, "Bars")
      .def_static("from_columns", &bars_from_columns)
      .def_static("from_file",
                  [](const std::string& path, const std::vector<std::string>& columns,
                     const std::vector<std::string>& prefixes) {
                    data::ColumnSelection selection{columns, prefixes};
                    return BarsPtr(std::make_shared<data::Bars>(data::load_bars(path, selection)));
                  })
      .def_static("synth",
                  [](std::size_t count, std::uint64_t seed, std::int64_t start_ms,
                     std::int64_t interval_ms, double initial_price, double ofi_signal) {
                    data::SynthConfig c;
                    c.bars = count;
                    c.seed = seed;
                    c.start_ms = start_ms;
                    c.interval_ms = interval_ms;
                    c.initial_price = initial_price;
                    c.ofi_signal = ofi_signal;
                    return BarsPtr(std::make_shared<data::Bars>(data::generate_bars(c)));
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
  m.def("train", &train_run);
  m.def("sweep", &sweep_run);
  m.def("backtest", &backtest);

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
           [](const Policy& p, const std::string& path, const std::string& inputs) {
             eval::write_onnx_model(path, p.file, p.path,
                                    eval::parse_onnx_inputs(inputs, "inputs="));
           })
#endif
      ;
  m.def("load_policy", &load_policy);
}
