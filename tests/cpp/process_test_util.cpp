#include "tests/cpp/process_test_util.hpp"

#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

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

// args[0] started with args, its stdout on out_fd, its stderr on err_fd (this
// process's when -1), in folder cwd (this process's when empty).
pid_t Spawn(const std::vector<std::string>& args, int out_fd, int err_fd,
            const std::string& cwd = "") {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(out_fd, 1);
    if (err_fd >= 0) ::dup2(err_fd, 2);
    if (!cwd.empty() && ::chdir(cwd.c_str()) != 0) ::_exit(126);
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  return pid;
}

}  // namespace

ProgramRun RunProgramBounded(const std::vector<std::string>& args, int timeout_s,
                             const std::string& cwd) {
  ProgramRun run;
  int out[2], err[2];
  if (::pipe(out) != 0 || ::pipe(err) != 0) {
    ADD_FAILURE() << "pipe failed";
    return run;
  }
  const pid_t pid = Spawn(args, out[1], err[1], cwd);
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

}  // namespace pstrain::testing
