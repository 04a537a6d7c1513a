// Files written beside the work that produces them: batches of writes run in the order they
// were handed over, one at a time, on a thread of their own, while the caller goes on (a
// population's next epoch, the next population).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace dqntrader::io {

class BackgroundWriter {
 public:
  /// At most `waiting` batches wait their turn (each may hold a checkpoint's bytes): submit()
  /// waits beyond that.
  explicit BackgroundWriter(std::size_t waiting = 2);
  BackgroundWriter(const BackgroundWriter&) = delete;
  BackgroundWriter& operator=(const BackgroundWriter&) = delete;
  /// Runs what was handed over to its end (what fails is lost: wait() first to see it).
  ~BackgroundWriter();

  /// Hands batch over. Error: what an earlier batch threw (the batches after a failed one do
  /// not run). Returns the seconds it waited for room.
  double submit(std::function<void()> batch);
  /// Waits until every batch handed over has run, rethrowing what one threw; the seconds.
  double wait();

 private:
  void work();

  std::size_t m_waiting;
  std::mutex m_mutex;
  std::condition_variable m_changed;
  std::deque<std::function<void()>> m_queue;
  bool m_running = false;  // a batch is under way
  bool m_closing = false;
  std::exception_ptr m_error;
  std::thread m_thread;
};

}  // namespace dqntrader::io
