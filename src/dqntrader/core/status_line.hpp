// One line of status on a terminal (a progress bar): rewritten in place, and cleared before
// anything else is written. Nothing is shown when the stream is not standard error on a
// terminal (a log file, a pipe).
#pragma once

#include <unistd.h>

#include <iostream>
#include <ostream>
#include <string>

namespace dqntrader {

class StatusLine {
 public:
  explicit StatusLine(std::ostream& out)
      : m_out(out), m_terminal(&out == &std::cerr && ::isatty(STDERR_FILENO) != 0) {}
  /// Whether the line is shown at all.
  bool shown() const { return m_terminal; }
  /// Replaces the line with text.
  void show(const std::string& text) {
    if (m_terminal)
      m_out << "\r\033[K" << text << std::flush;
  }
  /// Removes the line (the cursor back at its start).
  void clear() {
    if (m_terminal)
      m_out << "\r\033[K" << std::flush;
  }

 private:
  std::ostream& m_out;
  bool m_terminal;
};

}  // namespace dqntrader
