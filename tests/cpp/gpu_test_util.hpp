// Test support for the GPU suites that compare the GPU path with the CPU
// path through whole nets, trainers and programs: a training setup on a real
// LMDB, a ps-server process that is always reaped, a bounded program run,
// and float comparisons of nets and .caffemodel files.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "proto/caffe.pb.h"
#include "worker/net.hpp"

namespace pstrain::testing {

struct ProgramRun {
  int exit_code = -1;  // -1: killed at the deadline or by a signal
  std::string out;
  std::string err;
};
// Runs args[0] with args, capturing both streams; killed after timeout_s.
ProgramRun RunProgramBounded(const std::vector<std::string>& args, int timeout_s = 120);

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

// Files for a small classifier trained from a real LMDB under `dir`:
// dir/train_lmdb (32 records of 1 x 4 x 4, WriteCountingLmdb), dir/net.prototxt
// (Data -> InnerProduct -> ReLU -> InnerProduct -> SoftmaxWithLoss in TRAIN;
// Accuracy in TEST) and dir/solver.prototxt with `solver_extra` lines.
// Returns the solver's path.
std::string WriteLmdbClassifier(const std::string& dir, const std::string& solver_extra);

// Every learnable blob of a .caffemodel, in file order (fails the test if unreadable).
std::vector<std::vector<float>> CaffemodelBlobs(const std::string& path);

// |a - b| <= tolerance * max(1, |a|, |b|) element by element; names the first misses.
void ExpectAllNear(const std::vector<std::vector<float>>& expected,
                   const std::vector<std::vector<float>>& actual, float tolerance,
                   const std::string& what);
void ExpectNear(const std::vector<float>& expected, const std::vector<float>& actual,
                float tolerance, const std::string& what);

// A blob's data or diff as a vector (read on the host).
std::vector<float> DataOf(const Blob& blob);
std::vector<float> DiffOf(const Blob& blob);

}  // namespace pstrain::testing
