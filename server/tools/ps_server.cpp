// ps-server: one parameter-server shard.
//
//   ps-server --shard K --num-servers S --workers W --bind tcp://127.0.0.1:0
//             --solver S.prototxt [--mode bsp|ssp|asp] [--staleness N]
//             [--staleness-per-worker S0,S1,...]   (ssp; server/policies/ssp_per_worker.cpp)
//             [--coordinator ENDPOINT_OF_SERVER_0] [--resume X.manifest]
//             [--chunk-bytes B] [--job-key K] [--json] [--idle-exit-s T]
//             [--backup-workers B] [--staleness-lr] [--dc-lambda L [--dc-adaptive
//              --dc-momentum M --dc-epsilon E]]   (server/update_methods.hpp)
//             [--keys DIR] [--nonfinite drop|stop] [--shared-memory-mb M]
//             [--step-gate]   (server/policies/step_gate.cpp: pulls wait for GATE)
//             [--threads N|auto]  (threads applying a push, server/apply_threads.hpp;
//                                  auto, the default: the cores this process may use)
//             [--io-threads N]    (ZeroMQ I/O threads: the workers' connections, and
//                                  their CURVE and kernel copies, spread over them)
//
// Every flag can also come from the environment: PSTRAIN_SHARD (or PSTRAIN_RANK),
// PSTRAIN_NUM_SERVERS, PSTRAIN_NUM_WORKERS, PSTRAIN_BIND, PSTRAIN_ADVERTISE, ...
// (common/environment_flags.hpp; a flag wins).
//
// --keys DIR (a run folder's keys/, common/transport/curve.hpp) turns CURVE
// on: the shard reads its own secret key from DIR/server-K.key and admits only
// the public keys in DIR, each as the peer its file names. Without it, binding
// anything but loopback (127.0.0.1, ::1, ipc://) is refused, and SHUTDOWN and
// STATS are refused unless --job-key is set (docs/security.md).
//
// Binds one ROUTER and prints the endpoint workers should use, first:
//   {"event":"listening","endpoint":"tcp://127.0.0.1:40123",...}
// then serves (ShardLoop) until a SHUTDOWN, a signal (SIGINT/SIGTERM: the
// shard writes <snapshot_prefix>_interrupted.shard<K>.state and exits 0), or
// --idle-exit-s seconds without any message (exit 75, as any failure to
// hear from a peer; exit statuses in common/exit_code.hpp). Its last line is
//   {"event":"done","version":...,"pushes_applied":...,"staleness_histogram":[...],
//    "staleness_max":...,"bad_messages":...,"backup_dropped":...,"bytes_received":...,
//    "bytes_sent":...,"shared_memory_bytes_received":...,"shared_memory_bytes_sent":...,
//    "connections_refused":...,"nonfinite_rejected":...}
// (the shared_memory_ fields: the part of the payload bytes that went through
// shared-memory rings over ipc, common/transport/shared_ring.hpp).
#include <boost/program_options.hpp>
#include <csignal>
#include <cstdio>
#include <iostream>

#include "common/command_line.hpp"
#include "common/environment_flags.hpp"
#include "common/exit_code.hpp"
#include "common/json_line.hpp"
#include "common/optim/solver_proto.hpp"
#include "common/optim/update_rule_registry.hpp"
#include "common/proto_io.hpp"
#include "common/transport/address.hpp"
#include "common/transport/context.hpp"
#include "common/transport/malloc_tuning.hpp"
#include "common/transport/shared_ring.hpp"
#include "proto/caffe.pb.h"
#include "server/shard_loop.hpp"

namespace po = boost::program_options;
using pstrain::JsonLine;
using pstrain::Status;
using namespace pstrain::server;  // NOLINT: a program over one library
namespace transport = pstrain::transport;

namespace {

ShardLoop* g_service = nullptr;  // set while Run runs

// Besides PSTRAIN_<FLAG> (common/environment_flags.hpp): role-neutral and DMLC names.
const pstrain::EnvironmentAliases kEnvironmentAliases = {
    {"PSTRAIN_RANK", "shard"},      {"PSTRAIN_NUM_WORKERS", "workers"},
    {"DMLC_SERVER_ID", "shard"},    {"DMLC_NUM_SERVER", "num-servers"},
    {"DMLC_NUM_WORKER", "workers"},
};
void OnSignal(int) {
  if (g_service != nullptr) g_service->Stop();
}

struct Flags {
  ShardConfig config;
  std::string bind, advertise, coordinator, solver, mode = "bsp", resume, device = "cpu";
  std::string keys, nonfinite = "stop", staleness_per_worker, threads = "auto";
  bool json = false;
  int idle_exit_s = 600;
  uint64_t job_key = 0;
  int64_t max_iter = 0;
  int exchange_period = 1;
  int shared_memory_mb = transport::kSharedRingDefaultMb;
  bool pull_overlap = false;
  int pull_window_kb = 2048;
  int io_threads = 1;
};

class Printer {
 public:
  Printer(bool json, int shard) : json_(json), shard_(shard) {}
  void Event(JsonLine line, const std::string& text) const {
    if (json_) {
      std::printf("%s\n", line.str().c_str());
    } else {
      std::printf("[server %d] %s\n", shard_, text.c_str());
    }
    std::fflush(stdout);
  }
  void Log(const std::string& message) const {
    Event(Base("log").Add("message", message), message);
  }
  JsonLine Base(const std::string& event) const {
    JsonLine line;
    line.Add("event", event).Add("role", "server").Add("rank", shard_);
    return line;
  }

 private:
  bool json_;
  int shard_;
};

// Prints the failure and returns its exit code (common/exit_code.hpp).
int Fail(int shard, const Status& status) {
  return pstrain::ExitWith(status, "ps-server " + std::to_string(shard));
}

// Builds the shard's configuration from the flags and the solver file.
Status Configure(Flags& f) {
  auto mode = pstrain::ParseConsistencyMode(f.mode);
  if (!mode.ok()) return mode.status().WithContext("--mode");
  f.config.mode = mode.value();
  PSTRAIN_ASSIGN_OR_RETURN(f.config.device, ParseServerDevice(f.device));
  PSTRAIN_ASSIGN_OR_RETURN(f.config.nonfinite, ParseNonFinitePolicy(f.nonfinite));
  PSTRAIN_ASSIGN_OR_RETURN(f.config.threads, ParseServerThreads(f.threads));
  if (!f.staleness_per_worker.empty()) {
    PSTRAIN_ASSIGN_OR_RETURN(f.config.staleness_per_worker,
                             ParseStalenessList(f.staleness_per_worker));
  }
  if (f.config.device >= 0) PSTRAIN_RETURN_IF_ERROR(CheckServerDevice(f.config.device));
  caffe::SolverParameter solver;
  PSTRAIN_RETURN_IF_ERROR(pstrain::ReadTextProto(f.solver, &solver));
  auto hyper = pstrain::optim::SolverHyperFromProto(solver);
  if (!hyper.ok()) return hyper.status().WithContext(f.solver);
  f.config.hyper = hyper.value();
  if (f.config.device >= 0) {  // the updates run on the device: the rule needs a GPU kernel
    PSTRAIN_RETURN_IF_ERROR(pstrain::optim::CheckGpuKernel(f.config.hyper.type)
                                .WithContext(f.solver + ": --device " + f.device));
  }
  f.config.job_key = f.job_key;
  f.max_iter = solver.max_iter();
  f.config.snapshot_interval = solver.snapshot();
  f.config.snapshot_prefix = solver.snapshot_prefix();
  if (solver.snapshot_after_train()) f.config.final_iter = solver.max_iter();
  if (f.config.snapshot_prefix.empty()) f.config.snapshot_prefix = "snapshot";
  if (f.exchange_period < 1) {
    return Status::Error("--exchange-period must be at least 1, got " +
                         std::to_string(f.exchange_period));
  }
  if (f.exchange_period > 1) {
    // Clocks count exchanges: snapshot iterations and the end in those units.
    const int tau = f.exchange_period;
    if (!f.config.methods.elastic) return Status::Error("--exchange-period needs --elastic");
    if (f.max_iter % tau != 0 || f.config.snapshot_interval % tau != 0) {
      return Status::Error(f.solver + ": max_iter (" + std::to_string(f.max_iter) +
                           ") and snapshot (" + std::to_string(f.config.snapshot_interval) +
                           ") must be multiples of --exchange-period " + std::to_string(tau));
    }
    f.max_iter /= tau;
    f.config.snapshot_interval /= tau;
    f.config.final_iter /= tau;
  }
  return ValidateShardConfig(f.config);
}

// "tcp://HOST:PORT" (HOST an interface address or a host name, resolved
// here; PORT 0 or * for any free port), "ipc://PATH" or "inproc://NAME".
pstrain::Result<std::string> BindAddress(const std::string& bind) {
  const size_t sep = bind.find("://");
  if (sep == std::string::npos) {
    return Status::Error("--bind '" + bind + "' is not an endpoint like tcp://127.0.0.1:0");
  }
  const std::string kind = bind.substr(0, sep);
  std::string rest = bind.substr(sep + 3);
  if (kind != "tcp") return transport::MakeAddress(kind, rest, 0);
  const size_t colon = rest.rfind(':');
  if (colon == std::string::npos) return Status::Error("--bind '" + bind + "' has no port");
  const std::string port_text = rest.substr(colon + 1);
  int port = 0;
  if (port_text != "*") {
    try {
      size_t used = 0;
      port = std::stoi(port_text, &used);
      if (used != port_text.size()) throw std::invalid_argument(port_text);
    } catch (const std::exception&) {
      return Status::Error("--bind '" + bind + "' has a bad port '" + port_text + "'");
    }
  }
  return transport::MakeAddress("tcp", rest.substr(0, colon), port);
}

// The endpoint workers should use: the bound one, with `advertise` as host.
std::string Advertised(const std::string& endpoint, const std::string& advertise) {
  if (advertise.empty() || endpoint.rfind("tcp://", 0) != 0) return endpoint;
  const size_t colon = endpoint.rfind(':');
  return "tcp://" + advertise + endpoint.substr(colon);
}

// After a signal: the shard's state, to resume from.
void SaveInterrupted(const ShardState& shard, const Printer& printer) {
  const ShardConfig& c = shard.config();
  const std::string path =
      c.snapshot_prefix + "_interrupted.shard" + std::to_string(c.shard) + ".state";
  Status s = shard.initialized() ? shard.WriteCheckpoint(path)
                                 : Status::Error("not initialised, nothing to save");
  printer.Log(s.ok() ? "interrupted: wrote " + path
                     : "interrupted: no checkpoint (" + s.message() + ")");
}

// The last line after a SHUTDOWN, each field once.
void PrintDone(const pstrain::ShardStats& stats, transport::RingTraffic ring,
               const Printer& printer) {
  std::string histogram = "[";  // [k] = gradients applied with staleness k
  for (int i = 0; i < stats.staleness_histogram_size(); ++i) {
    histogram += (i ? "," : "") + std::to_string(stats.staleness_histogram(i));
  }
  histogram += "]";
  printer.Event(printer.Base("done")
                    .Add("version", stats.version())
                    .Add("pushes_applied", stats.pushes_applied())
                    .AddRaw("staleness_histogram", histogram)
                    .Add("staleness_max", stats.staleness_max())
                    .Add("bad_messages", stats.bad_messages())
                    .Add("backup_dropped", stats.backup_dropped())
                    .Add("bytes_received", stats.bytes_received())
                    .Add("bytes_sent", stats.bytes_sent())
                    .Add("shared_memory_bytes_received", ring.received)
                    .Add("shared_memory_bytes_sent", ring.sent)
                    .Add("connections_refused", stats.connections_refused())
                    .Add("nonfinite_rejected", stats.nonfinite_rejected()),
                "done at version " + std::to_string(stats.version()));
}

pstrain::Result<ShardState> MakeShard(const Flags& f) {
  if (f.resume.empty()) return ShardState(f.config);
  pstrain::CheckpointManifest manifest;
  PSTRAIN_RETURN_IF_ERROR(pstrain::ReadTextProto(f.resume, &manifest));
  if (manifest.num_shards() != f.config.num_shards ||
      manifest.shard_files_size() != f.config.num_shards) {
    return Status::Error(f.resume + ": the checkpoint has " +
                         std::to_string(manifest.num_shards()) + " shards, the job " +
                         std::to_string(f.config.num_shards));
  }
  return ShardState::Restore(f.config, manifest.shard_files(f.config.shard));
}

}  // namespace

// Out of host memory anywhere (the chunk store) ends with one line, exit 1;
// device memory is a Status from the device chunk store already.
int main(int argc, char** argv) try {
  pstrain::transport::ReexecWithHugePageHeap(argv);
  pstrain::SilenceProtobufLogs();
  Flags f;
  po::options_description desc("ps-server");
  desc.add_options()("help,h", "show this help")("version", "print the version")(
      "shard", po::value(&f.config.shard)->default_value(0), "this shard's rank")(
      "num-servers", po::value(&f.config.num_shards)->default_value(1), "number of shards")(
      "workers", po::value(&f.config.num_workers)->default_value(1), "number of workers")(
      "average-over", po::value(&f.config.averaged_workers)->default_value(0),
      "bsp with host aggregation: --workers counts the pushers (one a host), each pushing "
      "its host's summed gradients; a step averages over this many workers (0: --workers)")(
      "bind", po::value(&f.bind)->default_value("tcp://127.0.0.1:0"),
      "address to bind: tcp://HOST:PORT (port 0: any free port), ipc://PATH")(
      "advertise", po::value(&f.advertise),
      "host name or address workers should connect to (default: the bound address)")(
      "coordinator", po::value(&f.coordinator), "server 0's endpoint (shards > 0, for clipping)")(
      "solver", po::value(&f.solver), "solver prototxt (update rule, lr policy, snapshots)")(
      "mode", po::value(&f.mode)->default_value("bsp"), "bsp, ssp or asp")(
      "device", po::value(&f.device)->default_value("cpu"),
      "where the weights live and updates run: cpu or gpu:N (CUDA builds)")(
      "staleness", po::value(&f.config.staleness)->default_value(0), "ssp staleness bound")(
      "staleness-per-worker", po::value(&f.staleness_per_worker),
      "ssp: one staleness bound per worker, as 2,4 (instead of --staleness)")(
      "chunk-bytes", po::value(&f.config.chunk_bytes)->default_value(1 << 20), "chunk size")(
      "job-key", po::value(&f.job_key)->default_value(0), "the job's key")(
      "resume", po::value(&f.resume), "checkpoint manifest to resume from")(
      "wait-warn-ms", po::value(&f.config.wait_warn_ms)->default_value(10000),
      "log a pull that waits longer than this")(
      "idle-exit-s", po::value(&f.idle_exit_s)->default_value(600),
      "exit with an error after this long without any message (0: never)")(
      "json", po::bool_switch(&f.json), "one JSON object a line")(
      "backup-workers", po::value(&f.config.methods.backup_workers)->default_value(0),
      "bsp: a step takes the first W-B gradients of each chunk, drops the rest")(
      "step-gate", po::bool_switch(&f.config.step_gate),
      "start with the step gate closed at the start clock: a pull for iteration t is answered "
      "only once a driver's GATE raised the gate above t")(
      "staleness-lr", po::bool_switch(&f.config.methods.staleness_lr),
      "ssp/asp: scale each gradient by 1/max(1, staleness)")(
      "dc-lambda", po::value(&f.config.methods.dc_lambda)->default_value(0.f),
      "ssp/asp: DC-ASGD lambda (0: off)")("dc-adaptive",
                                          po::bool_switch(&f.config.methods.dc_adaptive),
                                          "DC-ASGD-a: lambda / sqrt(mean square of the gradient)")(
      "dc-momentum", po::value(&f.config.methods.dc_momentum)->default_value(0.95f),
      "DC-ASGD-a: momentum of the mean square")(
      "elastic", po::bool_switch(&f.config.methods.elastic),
      "EASGD / model averaging: pushes are weight deltas added to the weights, no solver")(
      "exchange-period", po::value(&f.exchange_period)->default_value(1),
      "with --elastic: iterations between two exchanges (clocks count exchanges)")(
      "dc-epsilon", po::value(&f.config.methods.dc_epsilon)->default_value(1e-7f),
      "DC-ASGD-a: epsilon added to the root mean square")(
      "keys", po::value(&f.keys),
      "CURVE keys folder: this shard's key pair and every key it admits (no secret on the "
      "command line)")("nonfinite", po::value(&f.nonfinite)->default_value("stop"),
                       "a pushed NaN or infinity: drop (refuse that push) or stop (end the job)")(
      "shared-memory-mb",
      po::value(&f.shared_memory_mb)->default_value(transport::kSharedRingDefaultMb),
      "ipc: replies of 16 KB or more go through a shared-memory ring of this many MiB per "
      "worker connection (0: through the socket)")(
      "pull-overlap", po::bool_switch(&f.pull_overlap),
      "send pull replies in forward order (lowest chunk id first), at most --pull-window-kb "
      "held by ZeroMQ per worker connection, so a first layer's weights overtake queued late "
      "layers' (the workers run --pull-overlap)")(
      "pull-window-kb", po::value(&f.pull_window_kb)->default_value(2048),
      "with --pull-overlap: bytes of pull replies ZeroMQ may hold per worker connection")(
      "io-threads", po::value(&f.io_threads)->default_value(1),
      "ZeroMQ I/O threads (1-64): each worker's connection is served by one of them, the "
      "least busy when it connects, so the shard's CURVE and kernel copies spread over them")(
      "threads", po::value(&f.threads)->default_value("auto"),
      "threads applying each push: a whole number >= 1, or auto (the cores this process may "
      "run on); the weights are the same bits for any count");
  po::variables_map vm;
  pstrain::FlagSpec spec;
  spec.program = "ps-server";
  spec.options = &desc;
  spec.environment = &kEnvironmentAliases;
  spec.required = {"solver"};
  if (auto exit_code = pstrain::ParseFlags(pstrain::ArgsAfterName(argc, argv), spec, vm)) {
    return *exit_code;
  }
  if (f.shared_memory_mb < 0 || f.shared_memory_mb > transport::kSharedRingMaxMb) {
    return pstrain::UsageError(spec, "--shared-memory-mb must be in [0, " +
                                         std::to_string(transport::kSharedRingMaxMb) + "], got " +
                                         std::to_string(f.shared_memory_mb));
  }
  if (f.io_threads < 1 || f.io_threads > transport::kIoThreadsMax) {
    return pstrain::UsageError(spec, "--io-threads must be in [1, " +
                                         std::to_string(transport::kIoThreadsMax) + "], got " +
                                         std::to_string(f.io_threads));
  }
  if (f.pull_window_kb < 1) {
    return pstrain::UsageError(spec, "--pull-window-kb must be at least 1, got " +
                                         std::to_string(f.pull_window_kb));
  }
  const int shard = f.config.shard;
  if (Status s = Configure(f); !s.ok()) return Fail(shard, s);
  auto bind_address = BindAddress(f.bind);
  if (!bind_address.ok()) return Fail(shard, bind_address.status());
  if (f.keys.empty() && !transport::IsLoopback(bind_address.value())) {
    return Fail(shard, Status::InvalidArgument(
                           "--bind " + f.bind +
                           ": binding an interface other hosts can reach "
                           "needs CURVE (--keys DIR; ps-train's security: curve); without keys "
                           "bind 127.0.0.1 or ipc://"));
  }
  auto made = MakeShard(f);
  if (!made.ok()) return Fail(shard, made.status());
  const Printer printer(f.json, shard);
  if (Status s = transport::TuneMallocForLargeFrames(); !s.ok()) printer.Log(s.message());

  ShardLoopOptions options;
  options.bind = bind_address.value();
  if (shard > 0) options.coordinator = f.coordinator;
  options.idle_exit = std::chrono::seconds(f.idle_exit_s);
  options.max_iter = f.max_iter;
  options.log = [&](const std::string& line) { printer.Log(line); };
  options.on_silence = [&](const ShardLoopOptions::Silence& silence) {
    printer.Event(printer.Base("stall")
                      .Add("worker", silence.worker)
                      .Add("clock", silence.clock)
                      .Add("silent_s", silence.seconds),
                  SilenceWarning(silence));
  };
  options.keys = f.keys;
  options.shared_memory_mb = f.shared_memory_mb;
  if (f.pull_overlap) options.pull_window_bytes = static_cast<size_t>(f.pull_window_kb) << 10;
  transport::Context context(f.io_threads);
  auto created = ShardLoop::Create(context, std::move(made).value(), std::move(options));
  if (!created.ok()) return Fail(shard, created.status());
  ShardLoop& service = *created.value();
  printer.Event(printer.Base("listening")
                    .Add("endpoint", Advertised(service.endpoint(), f.advertise))
                    .Add("mode", f.mode)
                    .Add("device", f.device)
                    .Add("threads", f.config.threads)
                    .Add("version", service.shard().version()),
                "listening on " + service.endpoint());
  if (f.keys.empty()) {
    printer.Log("security: none: no CURVE; any local process can connect" +
                std::string(f.job_key == 0 ? ", and SHUTDOWN and STATS are refused (no --job-key)"
                                           : " (the job key guards against strays only)"));
  }
  g_service = &service;
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  auto ended = service.Run();
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  g_service = nullptr;
  if (!ended.ok()) return Fail(shard, ended.status());

  if (ended.value() == ShardLoop::Ending::kStopped) {
    SaveInterrupted(service.shard(), printer);
  } else {
    PrintDone(service.shard().Stats(), service.ring_traffic(), printer);
  }
  return 0;
} catch (const std::bad_alloc&) {
  return pstrain::ExitOnOutOfMemory("ps-server", [&]() -> int { throw; });
}
