#include "dqntrader/io/atomic_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <vector>

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

constexpr int kMostLinks = 40;  // as the kernel's own limit on a path's symbolic links

// InputError unless the directory a new file at path goes into exists and can be written to.
void check_new_file(const std::string& given, const std::string& path) {
  const std::string directory = directory_of(path);
  struct stat info;
  if (::stat(directory.c_str(), &info) != 0) {
    throw InputError(given + ": its directory " + directory + " cannot be reached (" +
                     std::strerror(errno) + ")");
  }
  if (!S_ISDIR(info.st_mode))
    throw InputError(given + ": " + directory + " is not a directory");
  if (::access(directory.c_str(), W_OK | X_OK) != 0) {
    throw InputError(given + ": no file can be made in " + directory + " (" + std::strerror(errno) +
                     ")");
  }
}

}  // namespace

OutputPath resolve_output(const std::string& path) {
  if (path.empty())
    throw InputError("an empty path names no file");
  OutputPath out;
  out.path = path;
  for (int links = 0;; ++links) {
    struct stat info;
    if (::lstat(out.path.c_str(), &info) != 0) {
      if (errno != ENOENT)
        throw InputError(path + ": " + std::strerror(errno));
      check_new_file(path, out.path);
      return out;
    }
    if (!S_ISLNK(info.st_mode)) {
      if (S_ISREG(info.st_mode))
        return out;
      if (S_ISFIFO(info.st_mode) || S_ISCHR(info.st_mode)) {
        out.kind = OutputKind::write_through;
        return out;
      }
      const char* what = S_ISDIR(info.st_mode)    ? "a directory"
                         : S_ISSOCK(info.st_mode) ? "a socket"
                         : S_ISBLK(info.st_mode)  ? "a block device"
                                                  : "not a regular file";
      throw InputError(path + (out.path != path ? " (a link to " + out.path + ")" : "") + " is " +
                       what + "; a file cannot be written there");
    }
    if (links == kMostLinks)
      throw InputError(path + ": too many levels of symbolic links");
    std::vector<char> target(static_cast<std::size_t>(info.st_size > 0 ? info.st_size : 255) + 1);
    const ssize_t length = ::readlink(out.path.c_str(), target.data(), target.size());
    if (length < 0)
      fail("cannot read the link", out.path, errno);
    const std::string next(target.data(), static_cast<std::size_t>(length));
    out.path = next.front() == '/' ? next : directory_of(out.path) + "/" + next;
  }
}

bool same_file(const std::string& a, const std::string& b) {
  struct stat first, second;
  return ::stat(a.c_str(), &first) == 0 && ::stat(b.c_str(), &second) == 0 &&
         first.st_dev == second.st_dev && first.st_ino == second.st_ino;
}

bool same_file(int fd, const std::string& path) {
  struct stat open, named;
  return ::fstat(fd, &open) == 0 && ::stat(path.c_str(), &named) == 0 &&
         open.st_dev == named.st_dev && open.st_ino == named.st_ino;
}

AtomicFile::AtomicFile(const std::string& path) : m_path(path), m_target(resolve_output(path)) {
  if (m_target.kind == OutputKind::write_through) {
    m_written = m_target.path;
    m_fd = ::open(m_written.c_str(), O_WRONLY | O_CLOEXEC);
    if (m_fd < 0)
      fail("cannot open", m_written, errno);
    return;
  }
  m_written = m_target.path + ".tmp-" + std::to_string(::getpid()) + "-" +
              std::to_string(g_counter.fetch_add(1));
  m_fd = ::open(m_written.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (m_fd < 0)
    fail("cannot create", m_written, errno);
}

AtomicFile::~AtomicFile() {
  if (m_fd >= 0)
    ::close(m_fd);
  if (!m_committed && m_target.kind == OutputKind::replace)
    ::unlink(m_written.c_str());
}

void AtomicFile::write(const void* data, std::size_t bytes) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t written = ::write(m_fd, p, bytes);
    if (written < 0) {
      if (errno == EINTR)
        continue;
      fail("cannot write", m_written, errno);
    }
    p += written;
    bytes -= static_cast<std::size_t>(written);
  }
}

void AtomicFile::write(const std::vector<std::string_view>& pieces) {
  std::vector<iovec> left;
  for (const std::string_view piece : pieces) {
    if (!piece.empty())
      left.push_back({const_cast<char*>(piece.data()), piece.size()});
  }
  std::size_t first = 0;  // the first piece not written whole
  while (first < left.size()) {
    const int count = static_cast<int>(std::min<std::size_t>(left.size() - first, IOV_MAX));
    const ssize_t written = ::writev(m_fd, left.data() + first, count);
    if (written < 0) {
      if (errno == EINTR)
        continue;
      fail("cannot write", m_written, errno);
    }
    for (auto done = static_cast<std::size_t>(written); done > 0;) {
      iovec& piece = left[first];
      const std::size_t taken = std::min(done, piece.iov_len);
      piece.iov_base = static_cast<char*>(piece.iov_base) + taken;
      piece.iov_len -= taken;
      done -= taken;
      if (piece.iov_len == 0)
        ++first;
    }
  }
}

void AtomicFile::commit() {
  const int fd = m_fd;
  m_fd = -1;
  if (m_target.kind == OutputKind::write_through) {
    if (::close(fd) != 0)
      fail("cannot close", m_written, errno);
    m_committed = true;
    return;
  }
  if (::fsync(fd) != 0) {
    const int error = errno;
    ::close(fd);
    fail("cannot flush", m_written, error);
  }
  if (::close(fd) != 0)
    fail("cannot close", m_written, errno);
  if (::rename(m_written.c_str(), m_target.path.c_str()) != 0)
    fail("cannot rename onto", m_target.path, errno);
  m_committed = true;
  const std::string directory = directory_of(m_target.path);
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

void write_files(const std::vector<FileWrite>& given) {
  if (given.empty())
    return;
  // What the batch does to each file, in the order first given: a replacement takes the
  // appends that follow it into its content; appends alone are appended together.
  std::vector<FileWrite> files;
  for (const FileWrite& f : given) {
    const auto same = std::find_if(files.begin(), files.end(),
                                   [&](const FileWrite& g) { return g.path == f.path; });
    if (same == files.end())
      files.push_back(f);
    else if (f.append)
      same->bytes += f.bytes;
    else
      *same = f;
  }
  // Removes the temporary files not renamed yet, whatever happens.
  struct Pending {
    std::vector<std::pair<std::string, std::string>> renames;  // temporary, target
    ~Pending() {
      for (const auto& [temporary, target] : renames)
        ::unlink(temporary.c_str());
    }
  } pending;
  auto write_all = [](int fd, const std::string& bytes, const std::string& path) {
    const char* p = bytes.data();
    std::size_t left = bytes.size();
    while (left > 0) {
      const ssize_t written = ::write(fd, p, left);
      if (written < 0) {
        if (errno == EINTR)
          continue;
        const int error = errno;
        ::close(fd);
        fail("cannot write", path, error);
      }
      p += written;
      left -= static_cast<std::size_t>(written);
    }
    if (::close(fd) != 0)
      fail("cannot close", path, errno);
  };
  int flush_fd = -1;  // a descriptor on the file system to flush
  for (const FileWrite& f : files) {
    if (f.append) {
      const int fd = ::open(f.path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
      if (fd < 0)
        fail("cannot open for appending", f.path, errno);
      write_all(fd, f.bytes, f.path);
      continue;
    }
    const OutputPath target = resolve_output(f.path);
    if (target.kind != OutputKind::replace) {
      write_file_atomically(f.path, f.bytes);  // written through as it stands
      continue;
    }
    const std::string temporary = target.path + ".tmp-" + std::to_string(::getpid()) + "-" +
                                  std::to_string(g_counter.fetch_add(1));
    const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0)
      fail("cannot create", temporary, errno);
    pending.renames.emplace_back(temporary, target.path);
    write_all(fd, f.bytes, temporary);
  }
  const std::string& any = files.front().path;
  flush_fd = ::open(directory_of(any).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (flush_fd < 0)
    fail("cannot open directory", directory_of(any), errno);
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{flush_fd};
  if (::syncfs(flush_fd) != 0)
    fail("cannot flush the file system of", any, errno);
  for (auto& [temporary, target] : pending.renames) {
    if (::rename(temporary.c_str(), target.c_str()) != 0)
      fail("cannot rename onto", target, errno);
    temporary.clear();
  }
  pending.renames.clear();
  if (::syncfs(flush_fd) != 0)
    fail("cannot flush the file system of", any, errno);
}

}  // namespace dqntrader::io
