#include "tests/cpp/gpu_test_util.hpp"

#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "common/proto_io.hpp"
#include "tests/cpp/data_test_util.hpp"
#include "tests/cpp/net_test_util.hpp"
#include "tests/cpp/program_path.hpp"

namespace pstrain::testing {
namespace {

using Clock = std::chrono::steady_clock;

int MillisLeft(Clock::time_point deadline) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::max<int64_t>(0, left));
}

// Exit code of a finished child, -1 when a signal ended it.
int ExitCodeOf(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : -1; }

pid_t Spawn(const std::vector<std::string>& args, int out_fd, int err_fd) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(out_fd, 1);
    if (err_fd >= 0) ::dup2(err_fd, 2);
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  return pid;
}

}  // namespace

ProgramRun RunProgramBounded(const std::vector<std::string>& args, int timeout_s) {
  ProgramRun run;
  int out[2], err[2];
  if (::pipe(out) != 0 || ::pipe(err) != 0) {
    ADD_FAILURE() << "pipe failed";
    return run;
  }
  const pid_t pid = Spawn(args, out[1], err[1]);
  ::close(out[1]);
  ::close(err[1]);
  const auto deadline = Clock::now() + std::chrono::seconds(timeout_s);
  pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  std::string* sinks[2] = {&run.out, &run.err};
  int open = 2;
  bool late = false;
  while (open > 0) {
    const int left = MillisLeft(deadline);
    if (left == 0) {
      late = true;
      break;
    }
    if (::poll(fds, 2, left) < 0) continue;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buf[4096];
      const ssize_t n = ::read(fds[i].fd, buf, sizeof(buf));
      if (n > 0) {
        sinks[i]->append(buf, static_cast<size_t>(n));
      } else {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open;
      }
    }
  }
  for (const pollfd& f : fds) {
    if (f.fd >= 0) ::close(f.fd);
  }
  if (late) ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_FALSE(late) << args[0] << " ran past " << timeout_s << " s";
  if (!late) run.exit_code = ExitCodeOf(status);
  return run;
}

ServerProcess::ServerProcess(const std::vector<std::string>& flags) {
  std::vector<std::string> args = {ProgramPath("ps-server"), "--json"};
  args.insert(args.end(), flags.begin(), flags.end());
  if (std::find(flags.begin(), flags.end(), "--bind") == flags.end()) {
    args.push_back("--bind");
    args.push_back("tcp://127.0.0.1:0");
  }
  int out[2];
  if (::pipe(out) != 0) {
    ADD_FAILURE() << "pipe failed";
    return;
  }
  pid_ = Spawn(args, out[1], -1);
  ::close(out[1]);
  out_fd_ = out[0];
  // The first line, within 60 s.
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (first_line_.find('\n') == std::string::npos) {
    pollfd fd{out_fd_, POLLIN, 0};
    const int left = MillisLeft(deadline);
    if (left == 0 || ::poll(&fd, 1, left) <= 0) break;
    char c = 0;
    if (::read(out_fd_, &c, 1) != 1) break;
    first_line_ += c;
  }
  const size_t at = first_line_.find("\"endpoint\":\"");
  if (at == std::string::npos) {
    ADD_FAILURE() << "ps-server did not report its endpoint: " << first_line_;
    return;
  }
  endpoint_ = first_line_.substr(at + 12, first_line_.find('"', at + 12) - at - 12);
}

int ServerProcess::Wait(int timeout_s) {
  if (pid_ <= 0) return -1;
  const auto deadline = Clock::now() + std::chrono::seconds(timeout_s);
  int status = 0;
  pid_t done = 0;
  while ((done = ::waitpid(pid_, &status, WNOHANG)) == 0 && MillisLeft(deadline) > 0) {
    pollfd fd{out_fd_, POLLIN, 0};
    if (out_fd_ >= 0 && ::poll(&fd, 1, 100) > 0) {
      char buf[4096];
      const ssize_t n = ::read(out_fd_, buf, sizeof(buf));
      if (n > 0) {
        rest_.append(buf, static_cast<size_t>(n));
      } else {  // its stdout closed: wait for the exit alone
        ::close(out_fd_);
        out_fd_ = -1;
      }
    } else if (out_fd_ < 0) {
      ::usleep(100 * 1000);
    }
  }
  if (done == 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return -1;
  }
  pid_ = -1;
  char buf[4096];
  ssize_t n = 0;
  while (out_fd_ >= 0 && (n = ::read(out_fd_, buf, sizeof(buf))) > 0) {
    rest_.append(buf, static_cast<size_t>(n));
  }
  return ExitCodeOf(status);
}

ServerProcess::~ServerProcess() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  if (out_fd_ >= 0) ::close(out_fd_);
}

std::string WriteLmdbClassifier(const std::string& dir, const std::string& solver_extra) {
  WriteCountingLmdb(dir + "/train_lmdb", 32, 4, 4);
  WriteTextFile(dir + "/net.prototxt", R"(name: "lmdb_classifier"
layer { name: "data" type: "Data" top: "data" top: "label"
        transform_param { scale: 0.00390625 }
        data_param { source: ")" + dir + R"(/train_lmdb" batch_size: 8 backend: LMDB } }
layer { name: "ip1" type: "InnerProduct" bottom: "data" top: "ip1"
        inner_product_param { num_output: 12 weight_filler { type: "gaussian" std: 0.5 }
                              bias_filler { type: "constant" value: 0.1 } } }
layer { name: "relu1" type: "ReLU" bottom: "ip1" top: "ip1" }
layer { name: "ip2" type: "InnerProduct" bottom: "ip1" top: "ip2"
        inner_product_param { num_output: 32 weight_filler { type: "gaussian" std: 0.5 } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip2" bottom: "label" top: "loss" }
layer { name: "accuracy" type: "Accuracy" bottom: "ip2" bottom: "label" top: "accuracy"
        include { phase: TEST } }
)");
  const std::string solver = dir + "/solver.prototxt";
  WriteTextFile(solver, "net: \"" + dir + "/net.prototxt\"\nsnapshot_prefix: \"" + dir +
                            "/snap\"\nrandom_seed: 7\nlr_policy: \"fixed\"\n" + solver_extra +
                            "\n");
  return solver;
}

std::vector<std::vector<float>> CaffemodelBlobs(const std::string& path) {
  caffe::NetParameter model;
  const Status s = ReadBinaryProto(path, &model);
  EXPECT_TRUE(s.ok()) << s.message();
  std::vector<std::vector<float>> blobs;
  for (const auto& layer : model.layer()) {
    for (const auto& blob : layer.blobs())
      blobs.emplace_back(blob.data().begin(), blob.data().end());
  }
  return blobs;
}

void ExpectNear(const std::vector<float>& expected, const std::vector<float>& actual,
                float tolerance, const std::string& what) {
  ASSERT_EQ(expected.size(), actual.size()) << what;
  int misses = 0;
  for (size_t i = 0; i < expected.size() && misses < 5; ++i) {
    const float a = expected[i];
    const float b = actual[i];
    const float bound = tolerance * std::max({1.f, std::fabs(a), std::fabs(b)});
    if (!(std::fabs(a - b) <= bound)) {
      ADD_FAILURE() << what << "[" << i << "]: expected " << a << ", got " << b;
      ++misses;
    }
  }
}

void ExpectAllNear(const std::vector<std::vector<float>>& expected,
                   const std::vector<std::vector<float>>& actual, float tolerance,
                   const std::string& what) {
  ASSERT_EQ(expected.size(), actual.size()) << what;
  for (size_t i = 0; i < expected.size(); ++i) {
    ExpectNear(expected[i], actual[i], tolerance, what + " blob " + std::to_string(i));
  }
}

std::vector<float> DataOf(const Blob& blob) {
  return std::vector<float>(blob.cpu_data(), blob.cpu_data() + blob.count());
}

std::vector<float> DiffOf(const Blob& blob) {
  return std::vector<float>(blob.cpu_diff(), blob.cpu_diff() + blob.count());
}

}  // namespace pstrain::testing
