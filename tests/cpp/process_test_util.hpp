// Test support for running PSTrain's programs as real processes: a bounded
// program run that captures both streams, and a ps-server process that
// reports its endpoint and is always reaped.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace pstrain::testing {

struct ProgramRun {
  int exit_code = -1;  // -1: killed at the deadline or by a signal
  std::string out;
  std::string err;
};
// Runs args[0] with args in folder cwd (this process's when empty), capturing
// both streams; killed after timeout_s (a test failure).
ProgramRun RunProgramBounded(const std::vector<std::string>& args, int timeout_s = 120,
                             const std::string& cwd = "");

// A ps-server process started with `flags` (after --json, and --bind
// tcp://127.0.0.1:0 unless given); endpoint() from its "listening" line.
// The destructor kills it if it is still running and reaps it.
class ServerProcess {
 public:
  explicit ServerProcess(const std::vector<std::string>& flags);
  ~ServerProcess();
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  bool started() const { return !endpoint_.empty(); }
  const std::string& endpoint() const { return endpoint_; }
  const std::string& first_line() const { return first_line_; }
  // Waits up to timeout_s for the exit; its exit code, -1 if killed or late
  // (then it is killed). Also reads the rest of its stdout into rest().
  int Wait(int timeout_s);
  const std::string& rest() const { return rest_; }

 private:
  pid_t pid_ = -1;
  int out_fd_ = -1;
  std::string endpoint_;
  std::string first_line_;
  std::string rest_;
};

}  // namespace pstrain::testing
