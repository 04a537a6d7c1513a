#include "dqntrader/sweep/sweep_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "dqntrader/core/error.hpp"

namespace dqntrader::sweep {

SweepLock::SweepLock(const std::string& directory) {
  const std::string path = directory + "/sweep.lock";
  m_fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (m_fd < 0)
    throw Error("cannot open '" + path + "': " + std::strerror(errno));
  if (::flock(m_fd, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    char holder[32] = {0};
    const ssize_t n = ::pread(m_fd, holder, sizeof holder - 1, 0);
    ::close(m_fd);
    m_fd = -1;
    if (error != EWOULDBLOCK)
      throw Error("cannot lock '" + path + "': " + std::strerror(error));
    throw InputError("another dqntrader sweep is running in " + directory +
                     (n > 0 ? " (process " + std::string(holder, static_cast<std::size_t>(n)) + ")"
                            : std::string()) +
                     ": it holds " + path + " until it ends; wait for it, or stop it first");
  }
  const std::string pid = std::to_string(::getpid());
  if (::ftruncate(m_fd, 0) != 0 ||
      ::pwrite(m_fd, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    // Only the holder's id for the message of a process refused: the lock itself stands.
  }
}

SweepLock::~SweepLock() {
  if (m_fd >= 0)
    ::close(m_fd);  // releases the lock
}

}  // namespace dqntrader::sweep
