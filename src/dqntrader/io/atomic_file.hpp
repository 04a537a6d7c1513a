// Files that appear complete or not at all.
#pragma once

#include <cstddef>
#include <string>

namespace dqntrader::io {

/// Writes to "<path>.tmp-<pid>-<n>" in the same directory; commit() flushes it to disk
/// (fsync), renames it over path and fsyncs the directory. Destroyed without commit()
/// (an exception on the way), it removes the temporary file and leaves path untouched.
/// Every failing system call throws dqntrader::Error naming the path and the reason.
class AtomicFile {
 public:
  explicit AtomicFile(const std::string& path);
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ~AtomicFile();

  void write(const void* data, std::size_t bytes);
  void commit();

  const std::string& path() const { return m_path; }

 private:
  std::string m_path, m_temporary;
  int m_fd = -1;
  bool m_committed = false;
};

/// The whole content in one atomic replacement of path.
void write_file_atomically(const std::string& path, const std::string& content);

}  // namespace dqntrader::io
