// Files that appear complete or not at all, and what writing to a path means.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace dqntrader::io {

/// How a file is written to a path, decided by what the path is now, its symbolic links
/// followed to the end.
enum class OutputKind {
  replace,        // a new path or a regular file: replaced atomically
  write_through,  // a FIFO or a character device: written to as it stands
};

struct OutputPath {
  std::string path;  // the path written: the given one with its symbolic links resolved
  OutputKind kind = OutputKind::replace;
};

/// Where writing a file to path goes. InputError naming path and what it is when it is
/// something no file can be written to (a directory, a socket, a block device), its links
/// do not end, it is empty, or it is new and its directory does not exist or cannot be
/// written to.
OutputPath resolve_output(const std::string& path);

/// Whether a and b name one existing file (their links followed): the same device and inode.
bool same_file(const std::string& a, const std::string& b);

/// Whether the file open on descriptor fd is the existing file at path.
bool same_file(int fd, const std::string& path);

/// A file written to path: for a new path or a regular file (through any symbolic links),
/// to "<target>.tmp-<pid>-<n>" beside the target, which commit() flushes to disk (fsync),
/// renames over the target and whose directory it fsyncs; destroyed without commit() (an
/// exception on the way), the temporary file is removed and the target left untouched. A FIFO
/// or a character device is written through (commit() closes it). Every failing system call
/// throws dqntrader::Error naming the path and the reason; a path that cannot take a file
/// throws InputError (resolve_output).
class AtomicFile {
 public:
  explicit AtomicFile(const std::string& path);
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ~AtomicFile();

  void write(const void* data, std::size_t bytes);
  /// The pieces one after another, gathered into as few system calls as the system allows
  /// (one, for a file of fewer than IOV_MAX pieces and 2 GB).
  void write(const std::vector<std::string_view>& pieces);
  void commit();

  const std::string& path() const { return m_path; }

 private:
  std::string m_path;     // as given
  OutputPath m_target;    // where it goes
  std::string m_written;  // the file open for writing: the temporary one, or the target
  int m_fd = -1;
  bool m_committed = false;
};

/// The whole content in one atomic replacement of path (written through where path is a FIFO
/// or a character device).
void write_file_atomically(const std::string& path, const std::string& content);

/// One file of a batch: its whole content (replacing the file atomically), or a line to append.
struct FileWrite {
  std::string path;
  std::string bytes;
  bool append = false;
};

/// Many small files at once (a population's records and policies), in the order given (a
/// file replaced and then appended to ends with the replacement and the appends): each
/// replacement written to its temporary file and each append to its file, the file system
/// flushed to disk once (syncfs), the replacements renamed over their files, and the file
/// system flushed again: each file whole or as it was, for two flushes where a file at a time
/// takes two each. Error naming the file and the reason on the first failure (temporary files
/// removed).
void write_files(const std::vector<FileWrite>& files);

}  // namespace dqntrader::io
