#include "worker/multi_gpu_job.hpp"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "common/json_line.hpp"

extern char** environ;

namespace pstrain {
namespace fs = std::filesystem;

namespace {

Result<int> ParseDevice(const std::string& text, const std::string& flag_value) {
  if (text.empty() || text.size() > 4 ||
      text.find_first_not_of("0123456789") != std::string::npos) {
    return Status::InvalidArgument("-gpu " + flag_value +
                                   ": expected device ids separated by commas (0,1) or 'all'");
  }
  return std::stoi(text);
}

std::string Absolute(const std::string& path, const std::string& cwd) {
  if (path.empty() || path[0] == '/') return path;
  return (fs::path(cwd) / path).lexically_normal().string();
}

// The solver file's stem as a job name: letters, digits, '_', '.', '-',
// starting with a letter or digit.
std::string JobName(const std::string& solver_path) {
  std::string name = fs::path(solver_path).stem().string();
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != '-') c = '_';
  }
  while (!name.empty() && !std::isalnum(static_cast<unsigned char>(name[0]))) name.erase(0, 1);
  return name.empty() ? "ps-net" : name;
}

// The folder of this program's executable.
std::string ProgramFolder() {
  std::error_code error;
  const fs::path self = fs::read_symlink("/proc/self/exe", error);
  return error ? std::string() : self.parent_path().string();
}

bool OnPath(const std::string& program, std::string* found) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return false;
  std::string folders = path;
  size_t begin = 0;
  while (begin <= folders.size()) {
    size_t end = folders.find(':', begin);
    if (end == std::string::npos) end = folders.size();
    const std::string folder = folders.substr(begin, end - begin);
    const std::string candidate = (folder.empty() ? "." : folder) + "/" + program;
    if (::access(candidate.c_str(), X_OK) == 0) {
      *found = candidate;
      return true;
    }
    begin = end + 1;
  }
  return false;
}

}  // namespace

Result<std::vector<int>> ParseGpuList(const std::string& flag_value, int device_count) {
  std::vector<int> gpus;
  if (flag_value == "all") {
    for (int d = 0; d < device_count; ++d) gpus.push_back(d);
    return gpus;
  }
  size_t begin = 0;
  while (begin <= flag_value.size()) {
    size_t end = flag_value.find(',', begin);
    if (end == std::string::npos) end = flag_value.size();
    PSTRAIN_ASSIGN_OR_RETURN(int device,
                             ParseDevice(flag_value.substr(begin, end - begin), flag_value));
    gpus.push_back(device);
    begin = end + 1;
  }
  return gpus;
}

MultiGpuJob MakeMultiGpuJob(const std::string& solver_path, const std::string& weights,
                            const std::vector<int>& gpus, const std::string& cwd,
                            const std::string& command_line) {
  MultiGpuJob job;
  job.name = JobName(solver_path);
  job.solver = Absolute(solver_path, cwd);
  size_t begin = 0;
  while (!weights.empty() && begin <= weights.size()) {
    size_t end = weights.find(',', begin);
    if (end == std::string::npos) end = weights.size();
    std::string part = weights.substr(begin, end - begin);
    const size_t first = part.find_first_not_of(" \t");
    if (first != std::string::npos) {
      part = part.substr(first, part.find_last_not_of(" \t") + 1 - first);
      job.weights += (job.weights.empty() ? "" : ",") + Absolute(part, cwd);
    }
    begin = end + 1;
  }
  job.output = Absolute("runs", cwd);
  job.gpus = gpus;
  job.command_line = command_line;
  return job;
}

std::string MultiGpuJobYaml(const MultiGpuJob& job) {
  std::string devices;
  for (size_t i = 0; i < job.gpus.size(); ++i) {
    devices += (i ? ", " : "") + std::to_string(job.gpus[i]);
  }
  const size_t workers = job.gpus.size();
  // The longest Unix socket path ps-train would make (name-99 for a taken
  // name), against the 100 characters it allows.
  const size_t socket_path = job.output.size() + 1 + job.name.size() + 3 + 24;
  std::string yaml;
  yaml += "# " + job.command_line + "\n";
  yaml += "# Caffe's multi-GPU training as a parameter-server job: one worker per GPU, each\n";
  yaml += "# with the solver's batch, one CPU shard, bsp (every iteration one update with the\n";
  yaml += "# mean of the GPUs' gradients, as Caffe's NCCL synchronous SGD).\n";
  yaml += "name: " + JsonLine::Quote(job.name) + "\n";
  yaml += "solver: " + JsonLine::Quote(job.solver) + "\n";
  if (!job.weights.empty()) {
    yaml += "solver_overrides: {weights: [" + JsonLine::Quote(job.weights) + "]}\n";
  }
  yaml += "cluster:\n";
  yaml += "  servers: 1\n";
  yaml += "  server_device: cpu\n";
  yaml += "  workers: " + std::to_string(workers) + "\n";
  yaml += "  worker_devices: [" + devices + "]\n";
  yaml += "consistency: {mode: bsp}\n";
  yaml += std::string("transport: {kind: ") + (socket_path <= 100 ? "ipc" : "tcp") + "}\n";
  yaml += "output: " + JsonLine::Quote(job.output) + "\n";
  return yaml;
}

Result<int> RunPsTrain(const std::vector<std::string>& args) {
  std::vector<std::string> command;
  std::string ps_train;
  const std::string here = ProgramFolder();
  if (!here.empty() && ::access((here + "/ps-worker").c_str(), X_OK) == 0) {
    ::setenv("PSTRAIN_BUILD_DIR", fs::path(here).parent_path().c_str(), 1);
  }
  if (OnPath("ps-train", &ps_train)) {
    command.push_back(ps_train);
  } else {
    command = {"python3", "-m", "pstrain"};
    const fs::path checkout_python = fs::path(here).parent_path().parent_path() / "python";
    if (!here.empty() && fs::exists(checkout_python / "pstrain" / "__init__.py")) {
      const char* old = std::getenv("PYTHONPATH");
      std::string value = checkout_python.string();
      if (old != nullptr && old[0] != '\0') value += std::string(":") + old;
      ::setenv("PYTHONPATH", value.c_str(), 1);
    }
  }
  command.insert(command.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : command) argv.push_back(a.data());
  argv.push_back(nullptr);
  // The terminal's Ctrl-C reaches ps-train too (same process group); this
  // process waits for it to stop its job instead of dying first.
  struct sigaction ignore {
  }, old_int{}, old_quit{};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGINT, &ignore, &old_int);
  ::sigaction(SIGQUIT, &ignore, &old_quit);
  posix_spawnattr_t attributes;
  ::posix_spawnattr_init(&attributes);
  sigset_t defaults;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGINT);
  sigaddset(&defaults, SIGQUIT);
  ::posix_spawnattr_setsigdefault(&attributes, &defaults);
  ::posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGDEF);
  pid_t pid = -1;
  const int spawned = ::posix_spawnp(&pid, argv[0], nullptr, &attributes, argv.data(), environ);
  ::posix_spawnattr_destroy(&attributes);
  int status = 0;
  if (spawned == 0) {
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  ::sigaction(SIGINT, &old_int, nullptr);
  ::sigaction(SIGQUIT, &old_quit, nullptr);
  if (spawned != 0) {
    return Status::NotFound("cannot start ps-train (" + std::string(std::strerror(spawned)) +
                            "): install the orchestrator (pip install . in the checkout, or "
                            "bash scripts/setup.sh) so that ps-train is on PATH");
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

}  // namespace pstrain
