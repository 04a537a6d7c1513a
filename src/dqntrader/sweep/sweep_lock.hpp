// The sweep directory's lock: one process at a time works in a sweep's directory. It is an
// flock on DIR/sweep.lock, held for the process's life and released by the kernel however the
// process ends (a crash or SIGKILL included), so a lock never outlives its sweep.
#pragma once

#include <string>

namespace dqntrader::sweep {

class SweepLock {
 public:
  /// Takes the lock of directory (which must exist), writing this process's id into the lock
  /// file; InputError when another process holds it (naming it), Error when the file cannot
  /// be opened.
  explicit SweepLock(const std::string& directory);
  ~SweepLock();
  SweepLock(const SweepLock&) = delete;
  SweepLock& operator=(const SweepLock&) = delete;

 private:
  int m_fd = -1;
};

}  // namespace dqntrader::sweep
