// dist/ with MPI: the only code that calls it, on a communicator of its own (a duplicate of
// g_comm, or of the caller's). Rank 0's hand-out runs on a thread of its own, polling
// for requests between short sleeps so that it does not take a core from the training beside
// it; the main thread may call MPI at the same time (to end the job), so several ranks need
// MPI_THREAD_MULTIPLE.
#include <mpi.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <deque>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <thread>

#include "dqntrader/core/error.hpp"
#include "dqntrader/dist/dist.hpp"
#include "dqntrader/io/atomic_file.hpp"
#include "dqntrader/sweep/leaderboard.hpp"
#include "dqntrader/sweep/sweep_run.hpp"

namespace dqntrader::dist {

namespace {

namespace fs = std::filesystem;

Ranks g_ranks;
MPI_Comm g_comm = MPI_COMM_NULL;  // the sweep's: a duplicate, so no message meets another's
constexpr int kRequest = 1;       // a rank asks for work (with the results of its last population)
constexpr int kAssign = 2;        // rank 0 answers: a population, or -1 when none is left

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// text on rank 0 reaches every rank.
std::string broadcast(std::string text) {
  unsigned long long size = text.size();
  MPI_Bcast(&size, 1, MPI_UNSIGNED_LONG_LONG, 0, g_comm);
  text.resize(static_cast<std::size_t>(size));
  if (size > 0)
    MPI_Bcast(text.data(), static_cast<int>(size), MPI_CHAR, 0, g_comm);
  return text;
}

// Ends the job: a rank that fails takes every rank down with it.
[[noreturn]] void abort_job(const std::exception& e) {
  std::cerr << "dqntrader sweep: rank " << g_ranks.rank << " failed: " << e.what() << "\n";
  const int code = dynamic_cast<const InputError*>(&e) != nullptr ? 2 : 1;
  MPI_Abort(g_comm, code);
  std::_Exit(code);
}

nlohmann::json report_json(std::size_t p, double seconds,
                           const std::vector<sweep::MemberResult>& results) {
  nlohmann::json members = nlohmann::json::array();
  for (const sweep::MemberResult& r : results)
    members.push_back(sweep::to_json(r));
  return {{"population", p}, {"seconds", seconds}, {"results", members}};
}

// Population p trained on this rank: its results, and whether it finished. A device or
// file-system failure fails its members, saying which rank and why, and leaves it unfinished
// (a resume trains it again): the other ranks' populations go on.
std::pair<std::vector<sweep::MemberResult>, bool> train_population(const ExecSpace& space,
                                                                   const sweep::SweepPlan& plan,
                                                                   std::size_t p) {
  static train::SharedInputs shared;  // this rank's populations' bars and baselines
  try {
    return {sweep::run_planned_population(space, plan, p, {}, {}, nullptr, nullptr, &shared), true};
  } catch (const std::exception& e) {
    return {
        sweep::failed_population(plan, p, "rank " + std::to_string(g_ranks.rank) + ": " + e.what()),
        false};
  }
}

// A rank other than 0: asks for a population, trains it, reports and asks again.
void work(const ExecSpace& space, const sweep::SweepPlan& plan) {
  std::string report = "{}";
  for (;;) {
    MPI_Send(report.data(), static_cast<int>(report.size()), MPI_CHAR, 0, kRequest, g_comm);
    int p = -1;
    MPI_Recv(&p, 1, MPI_INT, 0, kAssign, g_comm, MPI_STATUS_IGNORE);
    if (p < 0)
      return;
    const auto start = Clock::now();
    const auto [results, finished] = train_population(space, plan, static_cast<std::size_t>(p));
    nlohmann::json j = report_json(static_cast<std::size_t>(p), seconds_since(start), results);
    j["finished"] = finished;
    report = j.dump();
  }
}

// Rank 0: hands out the populations, trains some itself, records every result.
void coordinate(const ExecSpace& space, sweep::SweepPlan& plan, std::ostream& log) {
  std::mutex mutex;  // plan, pending, the log and the overhead
  std::deque<std::size_t> pending;
  for (const sweep::PopulationPlan& q : plan.populations) {
    if (!q.finished)
      pending.push_back(q.id);
  }
  const std::size_t total = pending.size();
  double overhead = 0, trained = 0;  // rank 0's seconds of hand-out and records; populations'
  std::size_t handed = 0;
  auto take = [&]() -> std::optional<std::size_t> {
    std::lock_guard<std::mutex> lock(mutex);
    if (pending.empty())
      return std::nullopt;
    const std::size_t p = pending.front();
    pending.pop_front();
    return p;
  };
  auto finish = [&](std::size_t p, double seconds, const std::vector<sweep::MemberResult>& results,
                    bool finished) {
    const auto start = Clock::now();
    std::lock_guard<std::mutex> lock(mutex);
    log << sweep::record(plan, p, results, seconds, nullptr, finished) << std::endl;
    trained += seconds;
    overhead += seconds_since(start);
  };
  std::thread hand_out([&] {
    try {
      int asking = g_ranks.size - 1;  // ranks that have not yet been told to stop
      while (asking > 0) {
        int arrived = 0;
        MPI_Status status;
        MPI_Iprobe(MPI_ANY_SOURCE, kRequest, g_comm, &arrived, &status);
        if (arrived == 0) {
          std::this_thread::sleep_for(std::chrono::milliseconds(2));
          continue;
        }
        const auto start = Clock::now();
        int size = 0;
        MPI_Get_count(&status, MPI_CHAR, &size);
        std::string text(static_cast<std::size_t>(size), '\0');
        MPI_Recv(text.data(), size, MPI_CHAR, status.MPI_SOURCE, kRequest, g_comm,
                 MPI_STATUS_IGNORE);
        const nlohmann::json report = nlohmann::json::parse(text);
        if (report.contains("population")) {
          std::vector<sweep::MemberResult> results;
          for (const nlohmann::json& r : report.at("results"))
            results.push_back(sweep::member_result_from_json(r));
          finish(report.at("population").get<std::size_t>(), report.at("seconds").get<double>(),
                 results, report.at("finished").get<bool>());
        }
        const std::optional<std::size_t> next = take();
        const int p = next ? static_cast<int>(*next) : -1;
        MPI_Send(&p, 1, MPI_INT, status.MPI_SOURCE, kAssign, g_comm);
        asking -= p < 0 ? 1 : 0;
        std::lock_guard<std::mutex> lock(mutex);
        handed += next ? 1 : 0;
        overhead += seconds_since(start);
      }
    } catch (const std::exception& e) {
      abort_job(e);
    }
  });
  try {
    while (const std::optional<std::size_t> p = take()) {
      sweep::SweepPlan snapshot;
      {
        std::lock_guard<std::mutex> lock(mutex);
        snapshot = plan;
      }
      const auto start = Clock::now();
      const auto [results, finished] = train_population(space, snapshot, *p);
      finish(*p, seconds_since(start), results, finished);
    }
  } catch (const std::exception& e) {
    abort_job(e);
  }
  hand_out.join();
  char line[256];
  std::snprintf(line, sizeof line,
                "%d ranks; %zu populations (%zu handed out to other ranks); rank 0's hand-out "
                "and records took %.3f s, %.3f%% of the populations' %.1f s",
                g_ranks.size, total, handed, overhead, trained > 0 ? 100 * overhead / trained : 0.0,
                trained);
  log << line << "\n";
}

}  // namespace

namespace {

// The sweep's communicator: a duplicate of comm, and the ranks in it. Several ranks need
// MPI_THREAD_MULTIPLE (rank 0's hand-out thread beside its main thread): Error otherwise.
void join(MPI_Comm comm) {
  MPI_Comm_dup(comm, &g_comm);
  MPI_Comm_rank(g_comm, &g_ranks.rank);
  MPI_Comm_size(g_comm, &g_ranks.size);
  MPI_Comm node;
  MPI_Comm_split_type(g_comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &g_ranks.local_rank);
  MPI_Comm_free(&node);
  int provided = MPI_THREAD_SINGLE;
  MPI_Query_thread(&provided);
  if (provided < MPI_THREAD_MULTIPLE && g_ranks.size > 1) {
    throw Error(
        "this MPI library was started without MPI_THREAD_MULTIPLE, which a sweep over several "
        "ranks needs (rank 0 hands out populations on a thread of its own while it trains); "
        "start MPI with MPI_Init_thread(MPI_THREAD_MULTIPLE), or use an MPI built with "
        "threads");
  }
}

}  // namespace

Session::Session(int* argc, char*** argv, bool distributed) {
  if (!distributed)
    return;
  int provided = 0;
  MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
  try {
    join(MPI_COMM_WORLD);
  } catch (...) {
    if (g_comm != MPI_COMM_NULL)
      MPI_Comm_free(&g_comm);
    g_ranks = Ranks{};
    MPI_Finalize();
    throw;
  }
  m_finalize = true;
}

Session::Session(MPI_Comm comm) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized == 0)
    throw Error("dist::Session(comm): MPI has not been started");
  try {
    join(comm);
  } catch (...) {
    if (g_comm != MPI_COMM_NULL)
      MPI_Comm_free(&g_comm);
    g_ranks = Ranks{};
    throw;
  }
}

Session::~Session() {
  if (g_comm != MPI_COMM_NULL)
    MPI_Comm_free(&g_comm);
  g_ranks = Ranks{};
  if (m_finalize)
    MPI_Finalize();
}

std::string library_description() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING];
  int length = 0;
  MPI_Get_library_version(text, &length);
  std::string words(text, static_cast<std::size_t>(length));
  const std::size_t end = words.find_first_of(",\n");  // its first phrase
  return "MPI, " + words.substr(0, end);
}

const Ranks& ranks() {
  return g_ranks;
}

sweep::SweepPlan share_plan(const sweep::SweepPlan& plan,
                            const std::function<void(const sweep::SweepPlan&)>& write_first) {
  if (g_ranks.size == 1) {
    write_first(plan);
    return plan;
  }
  // Rank 0 writes a token into the directory; every rank must read it back in its own.
  const std::string token = plan.directory + "/.dqntrader-ranks";
  std::string nonce, problem;
  bool created = false;
  if (g_ranks.rank == 0) {
    try {
      created = !fs::exists(plan.directory);
      fs::create_directories(plan.directory);
      std::random_device entropy;
      nonce = std::to_string(entropy()) + "-" + std::to_string(entropy()) + "-" +
              std::to_string(::getpid());
      io::write_file_atomically(token, nonce);
    } catch (const std::exception& e) {
      problem = e.what();
    }
  }
  problem = broadcast(problem);
  if (!problem.empty())
    throw Error("cannot prepare the sweep directory " + plan.directory + ": " + problem);
  nonce = broadcast(nonce);
  std::ifstream in(token, std::ios::binary);
  const std::string seen((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  int mine = seen == nonce ? g_ranks.size : g_ranks.rank, first = 0;
  MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, g_comm);
  if (g_ranks.rank == 0) {
    std::error_code ignored;
    fs::remove(token, ignored);
    if (created && first < g_ranks.size)
      fs::remove(plan.directory, ignored);  // only when still empty
  }
  if (first < g_ranks.size) {
    throw Error("the sweep directory is not one directory on every rank: rank " +
                std::to_string(first) + " does not see in " +
                (g_ranks.rank == first ? plan.directory : std::string("its directory")) +
                " the file rank 0 wrote there; run every rank on a file system they share, "
                "with the same " +
                field("out") + " (or " + field("resume") + ")");
  }
  // Rank 0 writes the plan; its failure reaches every rank.
  std::exception_ptr failed;
  std::string failure;
  if (g_ranks.rank == 0) {
    try {
      write_first(plan);
    } catch (const std::exception& e) {
      failed = std::current_exception();
      failure = e.what();
    }
  }
  failure = broadcast(failure);
  if (failed)
    std::rethrow_exception(failed);
  if (!failure.empty())
    throw Error("rank 0 could not write the sweep's plan: " + failure);
  const std::string text = broadcast(g_ranks.rank == 0 ? sweep::plan_json(plan).dump() : "");
  if (g_ranks.rank == 0)
    return plan;
  return sweep::plan_from_json(nlohmann::json::parse(text), plan.directory, "rank 0's plan");
}

void run_sweep(const ExecSpace& space, sweep::SweepPlan& plan, std::ostream& log,
               const std::function<bool()>& interrupted) {
  if (g_ranks.size == 1) {
    sweep::run_sweep(space, plan, log, interrupted);
    return;
  }
  if (g_ranks.rank == 0) {
    coordinate(space, plan, log);
    sweep::write_leaderboards(plan);
  } else {
    try {
      work(space, plan);
    } catch (const std::exception& e) {
      abort_job(e);
    }
  }
}

}  // namespace dqntrader::dist
