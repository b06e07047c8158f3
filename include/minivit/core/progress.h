#pragma once
// The live progress line of long work. On a terminal it is redrawn in place a few times a
// second; otherwise (a log file, CI) it is printed as a plain line every `log_every` calls,
// so logs stay readable.
#include <chrono>
#include <string>

namespace minivit {

class ProgressLine {
 public:
  ProgressLine();
  // Shows `text`; `force` prints even if the last update was very recent.
  void update(const std::string& text, bool force = false);
  // Ends the in-place line (if any) so the next output starts on a fresh line.
  void finish();
  bool is_terminal() const { return terminal_; }

 private:
  bool terminal_;
  bool dirty_ = false;
  std::chrono::steady_clock::time_point last_;
};

std::string format_duration(double seconds);  // "1h02m", "3m12s", "42s"

// printf into a std::string (for messages and progress lines).
std::string strprintf(const char* format, ...) __attribute__((format(printf, 1, 2)));

}  // namespace minivit
