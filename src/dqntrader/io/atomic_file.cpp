#include "dqntrader/io/atomic_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "dqntrader/core/error.hpp"

namespace dqntrader::io {

namespace {

std::atomic<unsigned> g_counter{0};

[[noreturn]] void fail(const std::string& what, const std::string& path, int error) {
  throw Error(what + " '" + path + "': " + std::strerror(error));
}

std::string directory_of(const std::string& path) {
  const std::size_t slash = path.find_last_of('/');
  if (slash == std::string::npos)
    return ".";
  if (slash == 0)
    return "/";
  return path.substr(0, slash);
}

}  // namespace

AtomicFile::AtomicFile(const std::string& path) : m_path(path) {
  m_temporary =
      path + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(g_counter.fetch_add(1));
  m_fd = ::open(m_temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (m_fd < 0)
    fail("cannot create", m_temporary, errno);
}

AtomicFile::~AtomicFile() {
  if (m_fd >= 0)
    ::close(m_fd);
  if (!m_committed)
    ::unlink(m_temporary.c_str());
}

void AtomicFile::write(const void* data, std::size_t bytes) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t written = ::write(m_fd, p, bytes);
    if (written < 0) {
      if (errno == EINTR)
        continue;
      fail("cannot write", m_temporary, errno);
    }
    p += written;
    bytes -= static_cast<std::size_t>(written);
  }
}

void AtomicFile::commit() {
  if (::fsync(m_fd) != 0)
    fail("cannot flush", m_temporary, errno);
  const int fd = m_fd;
  m_fd = -1;
  if (::close(fd) != 0)
    fail("cannot close", m_temporary, errno);
  if (::rename(m_temporary.c_str(), m_path.c_str()) != 0)
    fail("cannot rename onto", m_path, errno);
  m_committed = true;
  const std::string directory = directory_of(m_path);
  const int dir_fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0)
    fail("cannot open directory", directory, errno);
  const int synced = ::fsync(dir_fd);
  const int error = errno;
  ::close(dir_fd);
  if (synced != 0)
    fail("cannot flush directory", directory, error);
}

void write_file_atomically(const std::string& path, const std::string& content) {
  AtomicFile file(path);
  file.write(content.data(), content.size());
  file.commit();
}

}  // namespace dqntrader::io
