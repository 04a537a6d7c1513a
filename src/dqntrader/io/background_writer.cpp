#include "dqntrader/io/background_writer.hpp"

#include <chrono>
#include <utility>

namespace dqntrader::io {

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

BackgroundWriter::BackgroundWriter(std::size_t waiting)
    : m_waiting(waiting), m_thread([this] { work(); }) {}

BackgroundWriter::~BackgroundWriter() {
  {
    std::lock_guard<std::mutex> lock(m_mutex);
    m_closing = true;
  }
  m_changed.notify_all();
  m_thread.join();
}

void BackgroundWriter::work() {
  std::unique_lock<std::mutex> lock(m_mutex);
  while (true) {
    m_changed.wait(lock, [this] { return m_closing || !m_queue.empty(); });
    if (m_queue.empty())
      return;  // closing, and nothing left
    std::function<void()> batch = std::move(m_queue.front());
    m_queue.pop_front();
    m_running = true;
    lock.unlock();
    std::exception_ptr error;
    try {
      batch();
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    m_running = false;
    if (error && !m_error) {
      m_error = error;
      m_queue.clear();  // what follows a failed batch does not run
    }
    m_changed.notify_all();
  }
}

double BackgroundWriter::submit(std::function<void()> batch) {
  const auto start = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(m_mutex);
  m_changed.wait(lock, [this] { return m_error || m_queue.size() < m_waiting; });
  if (m_error)
    std::rethrow_exception(m_error);
  m_queue.push_back(std::move(batch));
  lock.unlock();
  m_changed.notify_all();
  return seconds_since(start);
}

double BackgroundWriter::wait() {
  const auto start = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(m_mutex);
  m_changed.wait(lock, [this] { return m_error || (m_queue.empty() && !m_running); });
  if (m_error)
    std::rethrow_exception(m_error);
  return seconds_since(start);
}

}  // namespace dqntrader::io
