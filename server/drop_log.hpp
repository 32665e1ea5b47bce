// DropLog: log lines about dropped messages and refused connections at a
// bounded rate, so that a flood of garbage cannot fill a disk. The first
// `full_lines` reports are logged as they are; after that one line per
// `interval` says how many more there were ("... 9,940 more dropped in the
// last 10.0 s (10,000 in all)"). Used by one thread (ShardLoop's).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>

namespace pstrain::server {

class DropLog {
 public:
  using Clock = std::chrono::steady_clock;
  DropLog(std::function<void(const std::string&)> log, int full_lines,
          std::chrono::milliseconds interval)
      : log_(std::move(log)), full_lines_(full_lines), interval_(interval) {}

  // One dropped message or refused connection, described by `line`.
  void Report(const std::string& line, Clock::time_point now);
  // `n` reports without their descriptions (those beyond a bounded list).
  void Count(int64_t n, Clock::time_point now);
  // Logs the count line when `interval` has passed since the last one (or
  // `force`) and reports were held back meanwhile. Call periodically, and
  // with force at the end.
  void Flush(Clock::time_point now, bool force = false);

  int64_t total() const { return total_; }

 private:
  std::function<void(const std::string&)> log_;
  int full_lines_;
  std::chrono::milliseconds interval_;
  int64_t total_ = 0;
  int64_t held_ = 0;  // reports not logged since the last count line
  std::string last_held_;
  Clock::time_point last_count_line_{};
};

}  // namespace pstrain::server
