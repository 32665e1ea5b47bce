#include "server/drop_log.hpp"

#include <cstdio>

namespace pstrain::server {

void DropLog::Report(const std::string& line, Clock::time_point now) {
  ++total_;
  if (total_ <= full_lines_) {
    if (log_) log_(line);
    if (total_ == full_lines_) {
      if (log_) {
        log_("further drops are counted, one line every " +
             std::to_string(interval_.count() / 1000) + " s");
      }
      last_count_line_ = now;
    }
    return;
  }
  ++held_;
  last_held_ = line;
  Flush(now);
}

void DropLog::Count(int64_t n, Clock::time_point now) {
  if (n <= 0) return;
  total_ += n;
  held_ += n;
  Flush(now);
}

void DropLog::Flush(Clock::time_point now, bool force) {
  if (held_ == 0 || (!force && now - last_count_line_ < interval_)) return;
  const double seconds = std::chrono::duration<double>(now - last_count_line_).count();
  char text[160];
  std::snprintf(text, sizeof(text), "%lld more dropped or refused in the last %.1f s (%lld in all)",
                static_cast<long long>(held_), seconds, static_cast<long long>(total_));
  std::string line = text;
  if (!last_held_.empty()) line += "; the latest: " + last_held_.substr(0, 300);
  if (log_) log_(line);
  held_ = 0;
  last_held_.clear();
  last_count_line_ = now;
}

}  // namespace pstrain::server
