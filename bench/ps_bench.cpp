// ps-bench: push+pull throughput of the real parameter-server transport and
// shard server (docs/benchmarks.md).
//
//   ps-bench --size 16M [--params 4] [--workers W] [--servers S]
//            [--transport tcp|ipc] [--chunk-bytes B] [--mode asp|bsp|ssp]
//            [--runs 5] [--run-seconds 1.5] [--server-bin build/bin/ps-server]
//            [--server-wrapper "strace -c -f -o x"] [--bind-host 127.0.0.1]
//            [--curve] [--json]
//            [--shared-memory-mb M]
//
// --shared-memory-mb (ipc only; 0: off): the size of the shared-memory rings
// that carry payloads of 16 KB or more (common/transport/shared_ring.hpp).
//
// --curve: every socket uses CURVE as a ps-train job does by default (keys
// written into the private folder, the servers started with --keys).
//
// Starts S real `ps-server` processes (a generated solver: SGD, fixed lr,
// momentum 0.9), each bound to --bind-host (127.0.0.1) on a free port (tcp) or to a Unix
// socket (ipc), and runs W workers as threads of this process, each with its
// own ZeroMQ context and PsClient (the worker's real client: staging copies,
// per-shard DEALERs, push window). A synthetic parameter set of --size bytes
// in --params float32 blobs is placed on the shards exactly as a job would.
// Every worker iteration is: Pull(t), WaitPull (copy into the blobs),
// Push(all params, t). Worker 0 sends the initial weights first.
//
// Timing: a warm-up phase (also used to size a run to about --run-seconds),
// then --runs runs; all workers start and end each run together (a barrier),
// every push of the run acknowledged (Flush) before it ends. Reported per run
// and as the median over runs: iterations/s of one worker, push+pull payload
// GB/s of one worker (2 x size x iterations/s) and in total (x W).
// GB = 1e9 bytes.
#include <arpa/inet.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <boost/algorithm/string.hpp>
#include <boost/program_options.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/blob.hpp"
#include "common/transport/address.hpp"
#include "common/transport/context.hpp"
#include "common/transport/curve.hpp"
#include "common/transport/malloc_tuning.hpp"
#include "common/transport/shared_ring.hpp"
#include "worker/ps/ps_client.hpp"

namespace po = boost::program_options;
using Clock = std::chrono::steady_clock;

namespace {

struct Flags {
  std::string size = "16M";
  int params = 4;
  bool curve = false;
  int workers = 1;
  int servers = 1;
  std::string transport = "tcp";
  int64_t chunk_bytes = 1 << 20;
  std::string mode = "asp";
  int staleness = 0;
  int runs = 5;
  double run_seconds = 1.5;
  int warmup = 0;  // 0: automatic
  int max_in_flight = 16;
  int shared_memory_mb = pstrain::transport::kSharedRingDefaultMb;
  int io_threads = 1;  // each worker thread's context's ZeroMQ I/O threads
  int server_io_threads = 1;  // each server's (ps-server --io-threads)
  std::string server_bin;
  std::string server_wrapper;
  std::string bind_host = "127.0.0.1";  // tcp: the servers' address
  bool json = false;
  bool verbose = false;
};

int64_t ParseSize(const std::string& text) {
  if (text.empty()) throw std::runtime_error("empty size");
  size_t pos = 0;
  const double value = std::stod(text, &pos);
  std::string unit = boost::algorithm::to_upper_copy(text.substr(pos));
  int64_t scale = 1;
  if (unit == "" || unit == "B")
    scale = 1;
  else if (unit == "K" || unit == "KB")
    scale = 1000;
  else if (unit == "KI" || unit == "KIB")
    scale = 1024;
  else if (unit == "M" || unit == "MB")
    scale = 1000 * 1000;
  else if (unit == "MI" || unit == "MIB")
    scale = 1 << 20;
  else if (unit == "G" || unit == "GB")
    scale = 1000 * 1000 * 1000;
  else
    throw std::runtime_error("unknown size unit in '" + text + "'");
  return static_cast<int64_t>(value * static_cast<double>(scale));
}

// One ps-server child process; its stdout is read by a thread (the endpoint
// first, then drained so the server never blocks on a full pipe).
struct ServerProc {
  pid_t pid = -1;
  std::string endpoint;
  std::thread reader;
};

std::string JsonField(const std::string& line, const std::string& key) {
  const std::string pattern = "\"" + key + "\":\"";
  const size_t at = line.find(pattern);
  if (at == std::string::npos) return "";
  const size_t start = at + pattern.size();
  const size_t end = line.find('"', start);
  return end == std::string::npos ? "" : line.substr(start, end - start);
}

void StartServer(ServerProc& server, const std::vector<std::string>& argv, bool verbose) {
  int fds[2];
  if (pipe(fds) != 0) throw std::runtime_error("pipe failed");
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    close(fds[0]);
    close(fds[1]);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    std::fprintf(stderr, "ps-bench: cannot run %s: %s\n", args[0], std::strerror(errno));
    _exit(127);
  }
  close(fds[1]);
  server.pid = pid;
  auto promise = std::make_shared<std::promise<std::string>>();
  auto future = promise->get_future();
  server.reader = std::thread([fd = fds[0], promise, verbose]() {
    FILE* in = fdopen(fd, "r");
    char* line = nullptr;
    size_t cap = 0;
    bool told = false;
    while (getline(&line, &cap, in) > 0) {
      const std::string text(line);
      if (!told && text.find("\"event\":\"listening\"") != std::string::npos) {
        promise->set_value(JsonField(text, "endpoint"));
        told = true;
      } else if (verbose) {
        std::fprintf(stderr, "[server] %s", text.c_str());
      }
    }
    if (!told) promise->set_value("");
    free(line);
    fclose(in);
  });
  if (future.wait_for(std::chrono::seconds(30)) != std::future_status::ready) {
    throw std::runtime_error("ps-server did not report its endpoint in 30 s");
  }
  server.endpoint = future.get();
  if (server.endpoint.empty()) throw std::runtime_error("ps-server exited before listening");
}

std::string FindServerBin(const char* argv0) {
  std::error_code ec;
  auto self = std::filesystem::canonical("/proc/self/exe", ec);
  if (!ec) {
    auto candidate = self.parent_path() / "ps-server";
    if (std::filesystem::exists(candidate)) return candidate.string();
  }
  return std::filesystem::path(argv0).parent_path() / "ps-server";
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct WorkerTimes {
  double pull_wait = 0;  // PsClient: time in WaitPull (waiting + copying into blobs)
  double push = 0;       // time in Push (staging copies + sends + window waits)
  double flush = 0;
};

}  // namespace

int main(int argc, char** argv) {
  // As ps-worker and ps-server do (the servers inherit the variable).
  pstrain::transport::ReexecWithHugePageHeap(argv);
  Flags f;
  po::options_description desc("ps-bench");
  desc.add_options()("help,h", "show this help")(
      "size", po::value(&f.size)->default_value(f.size),
      "total parameter bytes (4K, 1M, 16M, 64M; 1000-based, Mi = 2^20)")(
      "params", po::value(&f.params)->default_value(f.params), "number of parameter blobs")(
      "workers", po::value(&f.workers)->default_value(f.workers), "worker threads")(
      "servers", po::value(&f.servers)->default_value(f.servers), "ps-server processes")(
      "transport", po::value(&f.transport)->default_value(f.transport), "tcp or ipc")(
      "chunk-bytes", po::value(&f.chunk_bytes)->default_value(f.chunk_bytes), "chunk size")(
      "mode", po::value(&f.mode)->default_value(f.mode), "asp, bsp or ssp")(
      "staleness", po::value(&f.staleness)->default_value(f.staleness), "ssp bound")(
      "runs", po::value(&f.runs)->default_value(f.runs), "timed runs")(
      "run-seconds", po::value(&f.run_seconds)->default_value(f.run_seconds),
      "approximate length of one run")("warmup", po::value(&f.warmup)->default_value(f.warmup),
                                       "warm-up iterations (0: about 0.5 s worth, at least 3)")(
      "max-in-flight", po::value(&f.max_in_flight)->default_value(f.max_in_flight),
      "unacknowledged pushes per server")("server-bin", po::value(&f.server_bin),
                                          "ps-server program (default: next to ps-bench)")(
      "server-wrapper", po::value(&f.server_wrapper),
      "command the servers run under, e.g. \"perf record -g -o /tmp/p.data --\"")(
      "bind-host", po::value(&f.bind_host)->default_value(f.bind_host),
      "tcp: the IPv4 address the servers bind (one of the host's own; with --server-wrapper \"ip "
      "netns exec NS\", one of NS's)")("verbose", po::bool_switch(&f.verbose),
                                        "echo the servers' output")(
      "curve", po::bool_switch(&f.curve), "CURVE on every socket (keys as ps-train makes them)")(
      "shared-memory-mb", po::value(&f.shared_memory_mb)->default_value(f.shared_memory_mb),
      "ipc: shared-memory ring size per connection (0: every byte through the socket)")(
      "io-threads", po::value(&f.io_threads)->default_value(f.io_threads),
      "ZeroMQ I/O threads of each worker thread's context (as ps-worker --io-threads)")(
      "server-io-threads", po::value(&f.server_io_threads)->default_value(f.server_io_threads),
      "ZeroMQ I/O threads of each server (ps-server --io-threads)")(
      "json", po::bool_switch(&f.json), "one JSON object for the result");
  po::variables_map vm;
  int64_t total_bytes = 0;
  try {
    po::store(po::command_line_parser(argc, argv).options(desc).run(), vm);
    po::notify(vm);
    total_bytes = ParseSize(f.size);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ps-bench: %s\n", e.what());
    return 2;
  }
  if (vm.count("help")) {
    std::cout << desc;
    return 0;
  }
  in_addr bind_address{};
  if (f.workers < 1 || f.servers < 1 || f.params < 1 || f.runs < 1 || total_bytes < 4 * f.params ||
      (f.transport != "tcp" && f.transport != "ipc") || f.io_threads < 1 ||
      f.io_threads > pstrain::transport::kIoThreadsMax || f.server_io_threads < 1 ||
      f.server_io_threads > pstrain::transport::kIoThreadsMax ||
      inet_pton(AF_INET, f.bind_host.c_str(), &bind_address) != 1) {
    std::fprintf(stderr, "ps-bench: bad arguments (see --help)\n");
    return 2;
  }
  const auto mode = pstrain::ParseConsistencyMode(f.mode);
  if (!mode.ok()) {
    std::fprintf(stderr, "ps-bench: --mode: %s\n", mode.status().message().c_str());
    return 2;
  }
  if (auto s = pstrain::transport::TuneMallocForLargeFrames(); !s.ok()) {
    std::fprintf(stderr, "ps-bench: %s\n", s.message().c_str());
  }
  if (f.transport == "tcp" && !f.curve &&
      !pstrain::transport::IsLoopback("tcp://" + f.bind_host + ":0")) {
    std::fprintf(stderr,
                 "ps-bench: --bind-host %s can be reached from other hosts: add --curve "
                 "(ps-server refuses it without keys)\n",
                 f.bind_host.c_str());
    return 2;
  }
  if (f.server_bin.empty()) f.server_bin = FindServerBin(argv[0]);

  // A private folder: the solver file and the ipc sockets.
  char tmpl[] = "/tmp/ps-bench-XXXXXX";
  if (!mkdtemp(tmpl)) {
    std::fprintf(stderr, "ps-bench: mkdtemp failed\n");
    return 1;
  }
  const std::filesystem::path dir(tmpl);
  const std::string solver = (dir / "solver.prototxt").string();
  {
    std::ofstream out(solver);
    out << "type: \"SGD\"\nbase_lr: 0.01\nlr_policy: \"fixed\"\nmomentum: 0.9\n"
           "max_iter: 1000000000\nsnapshot: 0\nsnapshot_after_train: false\n"
           "snapshot_prefix: \""
        << (dir / "snap").string() << "\"\n";
  }
  const uint64_t job_key = 777;
  const std::string keys = (dir / "keys").string();
  if (f.curve) {
    if (auto s = pstrain::transport::WriteKeyFolder(keys, f.servers, f.workers); !s.ok()) {
      std::fprintf(stderr, "ps-bench: %s\n", s.message().c_str());
      std::filesystem::remove_all(dir);
      return 1;
    }
  }

  std::vector<ServerProc> servers(static_cast<size_t>(f.servers));
  std::vector<std::string> endpoints;
  int exit_code = 0;
  try {
    for (int k = 0; k < f.servers; ++k) {
      std::vector<std::string> cmd;
      if (!f.server_wrapper.empty()) {
        boost::algorithm::split(cmd, f.server_wrapper, boost::is_any_of(" "),
                                boost::token_compress_on);
      }
      const std::string bind = f.transport == "tcp"
                                   ? "tcp://" + f.bind_host + ":0"
                                   : "ipc://" + (dir / ("s" + std::to_string(k))).string();
      for (const std::string& a : {f.server_bin,
                                   std::string("--shard"),
                                   std::to_string(k),
                                   std::string("--num-servers"),
                                   std::to_string(f.servers),
                                   std::string("--workers"),
                                   std::to_string(f.workers),
                                   std::string("--bind"),
                                   bind,
                                   std::string("--solver"),
                                   solver,
                                   std::string("--mode"),
                                   f.mode,
                                   std::string("--staleness"),
                                   std::to_string(f.staleness),
                                   std::string("--job-key"),
                                   std::to_string(job_key),
                                   std::string("--chunk-bytes"),
                                   std::to_string(f.chunk_bytes),
                                   std::string("--shared-memory-mb"),
                                   std::to_string(f.shared_memory_mb),
                                   std::string("--io-threads"),
                                   std::to_string(f.server_io_threads),
                                   std::string("--json")}) {
        cmd.push_back(a);
      }
      if (f.curve) {
        cmd.push_back("--keys");
        cmd.push_back(keys);
      }
      if (k > 0) {
        cmd.push_back("--coordinator");
        cmd.push_back(endpoints[0]);
      }
      StartServer(servers[static_cast<size_t>(k)], cmd, f.verbose);
      endpoints.push_back(servers[static_cast<size_t>(k)].endpoint);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ps-bench: %s\n", e.what());
    for (auto& s : servers) {
      if (s.pid > 0) kill(s.pid, SIGKILL);
    }
    for (auto& s : servers) {
      if (s.pid > 0) waitpid(s.pid, nullptr, 0);
      if (s.reader.joinable()) s.reader.join();
    }
    std::filesystem::remove_all(dir);
    return 1;
  }

  // Parameter sizes: total / params floats each, the last takes the rest.
  const int64_t total_floats = total_bytes / 4;
  std::vector<int64_t> sizes(static_cast<size_t>(f.params), total_floats / f.params);
  sizes.back() += total_floats - (total_floats / f.params) * f.params;
  const double payload_bytes = 4.0 * static_cast<double>(total_floats);  // one direction

  // Phases: 0 and 1 warm-up (1 sizes the runs), 2..runs+1 timed. Every participant (W workers +
  // main) meets at the barrier before and after each phase.
  std::barrier sync(f.workers + 1);
  std::atomic<int> iterations{0};
  std::atomic<bool> failed{false};
  std::mutex error_mutex;
  std::string first_error;
  std::vector<WorkerTimes> times(static_cast<size_t>(f.workers));
  const int warmup = f.warmup > 0 ? f.warmup : 0;

  auto worker_main = [&](int rank) {
    pstrain::transport::Context context(f.io_threads);
    std::vector<std::unique_ptr<pstrain::Blob>> blobs;
    std::vector<pstrain::PsParam> params;
    for (int p = 0; p < f.params; ++p) {
      auto blob = std::make_unique<pstrain::Blob>(
          std::vector<int>{static_cast<int>(sizes[static_cast<size_t>(p)])});
      std::fill_n(blob->mutable_cpu_data(), blob->count(), 0.01f);
      std::fill_n(blob->mutable_cpu_diff(), blob->count(), 0.001f);
      params.push_back({"p" + std::to_string(p), blob.get(), 1.f, 1.f});
      blobs.push_back(std::move(blob));
    }
    pstrain::PsClientOptions options;
    options.servers = endpoints;
    options.rank = rank;
    options.world_size = f.workers;
    options.job_key = job_key;
    if (f.curve) options.keys = keys;
    options.mode = mode.value();
    options.chunk_bytes = f.chunk_bytes;
    options.shared_memory_mb = f.shared_memory_mb;
    options.max_pushes_in_flight = f.max_in_flight;
    options.timeout = std::chrono::milliseconds(60000);
    std::vector<int> all(static_cast<size_t>(f.params));
    for (int p = 0; p < f.params; ++p) all[static_cast<size_t>(p)] = p;
    std::unique_ptr<pstrain::PsClient> client;
    int64_t clock = 0;
    auto fail = [&](const pstrain::Status& s) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (first_error.empty()) first_error = "worker " + std::to_string(rank) + ": " + s.message();
      failed = true;
    };
    pstrain::Status status;
    {
      auto connected = pstrain::PsClient::Connect(context, options, params);
      if (!connected.ok()) {
        status = connected.status();
      } else {
        client = std::move(connected).value();
        status = client->Hello(&clock);
        if (status.ok() && rank == 0) status = client->InitPush();
      }
    }
    if (!status.ok()) fail(status);
    WorkerTimes& t = times[static_cast<size_t>(rank)];
    for (int phase = 0; phase <= f.runs + 1; ++phase) {
      sync.arrive_and_wait();  // phase starts (main has set `iterations`)
      const int n = iterations.load();
      if (!failed) {
        for (int i = 0; i < n && status.ok(); ++i) {
          auto t0 = Clock::now();
          status = client->Pull(clock);
          int64_t version = 0;
          if (status.ok()) status = client->WaitPull(&version, nullptr);
          auto t1 = Clock::now();
          if (status.ok()) status = client->Push(all, clock, -1.0);
          auto t2 = Clock::now();
          ++clock;
          if (phase > 1) {
            t.pull_wait += std::chrono::duration<double>(t1 - t0).count();
            t.push += std::chrono::duration<double>(t2 - t1).count();
          }
        }
        auto t3 = Clock::now();
        if (status.ok()) status = client->Flush();
        if (phase > 1) t.flush += std::chrono::duration<double>(Clock::now() - t3).count();
        if (!status.ok()) fail(status);
      }
      sync.arrive_and_wait();  // phase ends
    }
    if (client && rank == 0) {
      // Every worker has flushed its last push (the barrier above).
      if (auto s = client->Shutdown(); !s.ok() && !failed) fail(s);
    }
  };

  std::vector<std::thread> threads;
  for (int r = 0; r < f.workers; ++r) threads.emplace_back(worker_main, r);

  std::vector<double> run_seconds;
  std::vector<int> run_iterations;
  // Warm-up: `warmup` (or 3) iterations, then about 0.5 s worth, which sizes the runs.
  double per_iteration = 0;
  for (int phase = 0; phase < 2; ++phase) {
    const int n =
        phase == 0 ? (warmup > 0 ? warmup : 3)
                   : std::clamp(static_cast<int>(0.5 / std::max(per_iteration, 1e-6)), 3, 100000);
    iterations = failed ? 0 : n;
    sync.arrive_and_wait();
    const auto start = Clock::now();
    sync.arrive_and_wait();
    per_iteration = std::chrono::duration<double>(Clock::now() - start).count() / n;
  }
  const int per_run =
      std::max(3, static_cast<int>(std::lround(f.run_seconds / std::max(per_iteration, 1e-6))));
  for (int run = 1; run <= f.runs; ++run) {
    iterations = failed ? 0 : per_run;
    sync.arrive_and_wait();
    const auto start = Clock::now();
    sync.arrive_and_wait();
    run_seconds.push_back(std::chrono::duration<double>(Clock::now() - start).count());
    run_iterations.push_back(per_run);
  }
  for (auto& th : threads) th.join();

  // Servers: worker 0 asked them to shut down; give them a moment, then stop them.
  for (auto& s : servers) {
    bool exited = false;
    for (int i = 0; i < 100 && !exited; ++i) {
      int st = 0;
      if (waitpid(s.pid, &st, WNOHANG) == s.pid)
        exited = true;
      else
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (!exited) {
      kill(s.pid, SIGINT);  // a wrapper (perf, strace) passes it on and writes its report
      for (int i = 0; i < 100 && !exited; ++i) {
        if (waitpid(s.pid, nullptr, WNOHANG) == s.pid)
          exited = true;
        else
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      if (!exited) {
        kill(s.pid, SIGKILL);
        waitpid(s.pid, nullptr, 0);
      }
    }
    if (s.reader.joinable()) s.reader.join();
  }
  std::filesystem::remove_all(dir);

  if (failed) {
    std::fprintf(stderr, "ps-bench: %s\n", first_error.c_str());
    return 1;
  }

  std::vector<double> its;  // per worker, per run
  for (size_t i = 0; i < run_seconds.size(); ++i) its.push_back(run_iterations[i] / run_seconds[i]);
  const double med_its = Median(its);
  const double gb_worker = 2.0 * payload_bytes * med_its / 1e9;
  const double gb_total = gb_worker * f.workers;
  double timed = 0;
  for (double s : run_seconds) timed += s;
  WorkerTimes sum;
  for (const auto& t : times) {
    sum.pull_wait += t.pull_wait;
    sum.push += t.push;
    sum.flush += t.flush;
  }
  const double denom = timed * f.workers;
  if (f.json) {
    std::printf(
        "{\"event\":\"ps_bench\",\"size_bytes\":%lld,\"params\":%d,\"workers\":%d,"
        "\"servers\":%d,\"transport\":\"%s\",\"curve\":%s,\"chunk_bytes\":%lld,"
        "\"shared_memory_mb\":%d,\"mode\":\"%s\",\"iterations_per_run\":%d,\"runs_its\":[",
        static_cast<long long>(4 * total_floats), f.params, f.workers, f.servers,
        f.transport.c_str(), f.curve ? "true" : "false", static_cast<long long>(f.chunk_bytes),
        f.transport == "ipc" ? f.shared_memory_mb : 0, f.mode.c_str(), per_run);
    for (size_t i = 0; i < its.size(); ++i) std::printf("%s%.4f", i ? "," : "", its[i]);
    std::printf(
        "],\"its_per_worker\":%.4f,\"gbps_per_worker\":%.4f,\"gbps_total\":%.4f,"
        "\"share_pull\":%.3f,\"share_push\":%.3f,\"share_flush\":%.3f}\n",
        med_its, gb_worker, gb_total, sum.pull_wait / denom, sum.push / denom, sum.flush / denom);
  } else {
    std::printf(
        "size %lld B, %d params, %d worker(s), %d server(s), %s%s%s, chunk %lld B, %s: "
        "%d it/run; median %.2f it/s per worker, %.3f GB/s per worker, %.3f GB/s total "
        "(time: pull %.0f%%, push %.0f%%, flush %.0f%%)\n",
        static_cast<long long>(4 * total_floats), f.params, f.workers, f.servers,
        f.transport.c_str(),
        f.transport == "ipc" && f.shared_memory_mb > 0 ? " + shared memory" : "",
        f.curve ? " + CURVE" : "", static_cast<long long>(f.chunk_bytes), f.mode.c_str(), per_run,
        med_its, gb_worker, gb_total, 100 * sum.pull_wait / denom, 100 * sum.push / denom,
        100 * sum.flush / denom);
  }
  return exit_code;
}
