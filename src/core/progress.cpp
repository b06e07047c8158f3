#include "minivit/core/progress.h"

#include <unistd.h>

#include <cstdarg>
#include <cstdio>

namespace minivit {

ProgressLine::ProgressLine() : terminal_(::isatty(STDERR_FILENO)), last_() {}

void ProgressLine::update(const std::string& text, bool force) {
  const auto now = std::chrono::steady_clock::now();
  if (terminal_) {
    if (!force && now - last_ < std::chrono::milliseconds(200)) return;
    std::fprintf(stderr, "\r\033[K%s", text.c_str());
    dirty_ = true;
  } else {
    std::fprintf(stderr, "%s\n", text.c_str());
  }
  std::fflush(stderr);
  last_ = now;
}

void ProgressLine::finish() {
  if (terminal_ && dirty_) std::fprintf(stderr, "\n");
  dirty_ = false;
}

std::string format_duration(double seconds) {
  char buf[32];
  const long s = long(seconds + 0.5);
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%ldh%02ldm", s / 3600, (s % 3600) / 60);
  else if (s >= 60)
    std::snprintf(buf, sizeof buf, "%ldm%02lds", s / 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%lds", s);
  return buf;
}

std::string strprintf(const char* format, ...) {
  va_list args;
  va_start(args, format);
  va_list copy;
  va_copy(copy, args);
  const int n = std::vsnprintf(nullptr, 0, format, copy);
  va_end(copy);
  std::string out(size_t(n > 0 ? n : 0), '\0');
  std::vsnprintf(out.data(), out.size() + 1, format, args);
  va_end(args);
  return out;
}

}  // namespace minivit
