// ps-worker: one worker of a parameter-server job.
//
//   ps-worker --solver S.prototxt --rank R --workers W --servers EP0,EP1,...
//             [--job-key K] [--chunk-bytes B] [--mode bsp|ssp|asp] [--staleness S]
//             [--weights W.caffemodel] [--straggle-ms D] [--straggle-jitter-ms J]
//             [--compression none|fp16|bf16|topk|sign [--topk-ratio R] [--no-error-feedback]]
//             [--pull-compression none|fp16|bf16] [--gpu-ipc auto|true|false]
//             [--elastic easgd|average --exchange-period T [--elastic-alpha A]]
//             [--threads N] [--engine auto|fast|reference] [--gpu N] [--json] [--timeout-s T]
//             [--shared-memory-mb M] [--io-threads N] [--sufficient-factors
//              [--factor-broadcast [--factor-verify-interval K] [--factor-verify-strict]
//               [--factor-right every_shard|holder [--forward-shards K,..]]]]
//             [--host-groups G0,G1,... --host-group-shm /NAME]
//
// --host-groups (bsp host aggregation, worker/ps/host_group.hpp): each
// worker's group, numbered in order of first appearance (worker 0 in group
// 0); the workers of a group share shared memory /NAME-g<group> and the
// group's lowest rank pushes their sum as pusher <group> of G (the servers
// run with --workers G --average-over W).
//
// Every flag can also come from the environment: PSTRAIN_RANK (or RANK),
// PSTRAIN_NUM_WORKERS (or WORLD_SIZE), PSTRAIN_SERVERS, PSTRAIN_SOLVER, ...
// (common/environment_flags.hpp; a flag wins). --advertise names this worker's host
// in its first line (nothing connects to a worker).
//
// Normally started by ps-train; useful by hand for experiments. Prints the
// training events (worker 0 also test results and snapshots). On failure one
// line "ps-worker R: <cause>" on stderr. Exit status (common/exit_code.hpp):
// 0 done, 1 a permanent failure, 2 bad arguments, 3 training diverged, 75 a
// server gone or silent past --timeout-s (retryable).
#ifdef PSTRAIN_HAVE_PYTHON_EMBED
#include "worker/python/python_embed.hpp"
#endif
#include <boost/algorithm/string.hpp>
#include <boost/program_options.hpp>
#include <cstdio>
#include <iostream>

#include "common/command_line.hpp"
#include "common/device.hpp"
#include "common/environment_flags.hpp"
#include "common/exit_code.hpp"
#include "common/glog_line.hpp"
#include "common/json_line.hpp"
#include "common/math_cpu.hpp"
#include "common/proto_io.hpp"
#include "common/transport/context.hpp"
#include "common/transport/malloc_tuning.hpp"
#include "common/transport/shared_ring.hpp"
#include "worker/layers/memory_data_layer.hpp"
#include "worker/ps/ps_worker.hpp"

namespace po = boost::program_options;

namespace {
// Besides PSTRAIN_<FLAG> (common/environment_flags.hpp): torchrun's and DMLC's names.
const pstrain::EnvironmentAliases kEnvironmentAliases = {
    {"PSTRAIN_NUM_WORKERS", "workers"}, {"RANK", "rank"},
    {"WORLD_SIZE", "workers"},          {"DMLC_WORKER_ID", "rank"},
    {"DMLC_NUM_WORKER", "workers"},
};

// A whole number written in full ("2": not "2x", "-1" or ""), or -1.
int WholeNumber(const std::string& text) {
  try {
    size_t used = 0;
    const int n = std::stoi(text, &used);
    return used == text.size() && n >= 0 ? n : -1;
  } catch (const std::exception&) {
    return -1;
  }
}
}  // namespace

int main(int argc, char** argv) {
  pstrain::transport::ReexecWithHugePageHeap(argv);
#ifdef PSTRAIN_HAVE_PYTHON_EMBED
  pstrain::EnablePythonLayers(argv[0]);
#endif
  pstrain::SilenceProtobufLogs();
  pstrain::PsWorkerOptions options;
  std::string servers, engine = "auto", engine_cache, mode = "bsp", advertise, compression = "none",
                       pull_compression = "none", gpu_ipc = "false";
  bool no_error_feedback = false;
  std::string elastic = "none";
  int threads = 1;
  int io_threads = 1;
  int timeout_s = 120;
  int gpu = -1;
  bool json = false;
  uint64_t job_key = 0;
  std::vector<std::string> memory_data;
  std::string host_groups, host_group_shm;
  std::string factor_right, forward_shards;
  po::options_description desc("ps-worker");
  desc.add_options()("help,h", "show this help")("version", "print the version")(
      "solver", po::value(&options.solver_path), "solver prototxt")(
      "rank", po::value(&options.client.rank)->default_value(0), "this worker's rank")(
      "workers", po::value(&options.client.world_size)->default_value(1), "number of workers")(
      "servers", po::value(&servers), "server endpoints, comma-separated, shard order")(
      "job-key", po::value(&job_key)->default_value(0), "the job's key (guards against strays)")(
      "keys", po::value(&options.client.keys),
      "CURVE keys folder: this worker's key pair and the servers' public keys")(
      "chunk-bytes", po::value(&options.client.chunk_bytes)->default_value(1 << 20),
      "largest piece of a parameter in one message")("mode", po::value(&mode)->default_value("bsp"),
                                                     "bsp, ssp or asp")(
      "staleness", po::value(&options.staleness)->default_value(0), "ssp staleness bound")(
      "weights", po::value(&options.weights), "initial weights (worker 0, fresh job)")(
      "straggle-ms", po::value(&options.straggle_ms)->default_value(0),
      "sleep this many ms every iteration (straggler experiments)")(
      "straggle-jitter-ms", po::value(&options.straggle_jitter_ms)->default_value(0),
      "plus a random 0..J ms every iteration")(
      "max-in-flight", po::value(&options.client.max_pushes_in_flight)->default_value(16),
      "unacknowledged pushes per server")("timeout-s", po::value(&timeout_s)->default_value(120),
                                          "a server silent this long is an error")(
      "threads", po::value(&threads)->default_value(1), "CPU threads (0: all cores)")(
      "io-threads", po::value(&io_threads)->default_value(1),
      "ZeroMQ I/O threads (the DEALERs to the shards spread over them)")(
      "engine", po::value(&engine)->default_value("auto"),
      "auto (each layer's fastest CPU implementation, timed at set-up), fast or reference")(
      "engine-cache", po::value(&engine_cache),
      "engine auto's choices file (default ~/.cache/pstrain/cpu-implementations.tsv; 'none')")(
      "gpu", po::value(&gpu), "train on CUDA device N (CUDA builds; overrides --engine)")(
      "advertise", po::value(&advertise),
      "this worker's host as its peers know it (shown in its first line)")(
      "json", po::bool_switch(&json), "one JSON object a line")(
      "compression", po::value(&compression)->default_value("none"),
      "gradient pushes: none, fp16, bf16, topk or sign")(
      "gpu-ipc", po::value(&gpu_ipc)->default_value("false"),
      "GPU worker, GPU shard on this host, bsp: push gradients through CUDA IPC (device "
      "memory, docs/wire-protocol.md): auto (where every shard accepts, else the socket), "
      "true (a refusal is an error) or false (the default until a GPU has run it)")(
      "pull-compression", po::value(&pull_compression)->default_value("none"),
      "pulled weights: none (float32), fp16 or bf16 (rounded to nearest even by the shards, "
      "whose master weights stay float32)")(
      "topk-ratio", po::value(&options.client.topk_ratio)->default_value(0.01),
      "topk: the fraction of each chunk's values sent, in (0, 1]")(
      "elastic", po::value(&elastic)->default_value("none"),
      "none, easgd or average: train locally, exchange with the servers every period")(
      "exchange-period", po::value(&options.elastic.period)->default_value(1),
      "with --elastic: iterations between two exchanges")(
      "elastic-alpha", po::value(&options.elastic.alpha)->default_value(0.1f),
      "easgd: the moving rate alpha")(
      "shared-memory-mb",
      po::value(&options.client.shared_memory_mb)
          ->default_value(pstrain::transport::kSharedRingDefaultMb),
      "ipc: pushes of 16 KB or more go through a shared-memory ring of this many MiB per "
      "server (0: through the socket; the servers must agree)")(
      "sufficient-factors", po::bool_switch(&options.sufficient_factors),
      "push an InnerProduct weight's gradient as its factors (top diff, bottom data) where "
      "those are fewer bytes (not with GPU IPC pushes)")(
      "factor-broadcast", po::bool_switch(&options.factor_broadcast),
      "with --sufficient-factors, bsp: pull such a weight as every worker's factors of the step "
      "where those are fewer bytes, applied to a replica exactly as the servers apply them "
      "(CPU engine)")(
      "factor-right", po::value(&factor_right)->default_value("every_shard"),
      "--factor-broadcast: every_shard (a factor push carries R to every shard of the weight) "
      "or holder (R only to the worker's holder shard; the other shards get it forwarded by "
      "the worker of --forward-shards)")(
      "forward-shards", po::value(&forward_shards)->default_value(""),
      "--factor-right holder: the shards this worker forwards R's to (0,2, or none; "
      "default: the shards k with k % workers == rank)")(
      "factor-verify-interval",
      po::value(&options.factor_verify_interval)->default_value(0),
      "--factor-broadcast: every K iterations also pull the weights and history and compare "
      "the replica with them bit for bit (0: never)")(
      "factor-verify-strict", po::bool_switch(&options.factor_verify_strict),
      "--factor-broadcast: a replica that differs from the servers is an error (tests), not a "
      "warning")(
      "pull-overlap", po::bool_switch(&options.pull_overlap),
      "start each layer's forward once its own weights are pulled, not the whole pull "
      "(CPU engine; the servers run --pull-overlap to answer in forward order)")(
      "no-error-feedback", po::bool_switch(&no_error_feedback),
      "topk/sign: drop what the encoding loses instead of adding it to the next push")(
      "memory-data", po::value(&memory_data)->composing(),
      "LAYER=DATA.npy,LABELS.npy: feed MemoryData layer LAYER from these .npy files, mapped "
      "read-only and sharded by rank as the Data layer shards (repeatable)")(
      "host-groups", po::value(&host_groups),
      "bsp host aggregation: every worker's group (0,0,1,1): a group's workers sum their "
      "gradients in shared memory and its lowest rank pushes once")(
      "host-group-shm", po::value(&host_group_shm),
      "with --host-groups: the shared-memory name prefix (/NAME; group g uses /NAME-g<g>)");
  po::variables_map vm;
  pstrain::FlagSpec spec;
  spec.program = "ps-worker";
  spec.options = &desc;
  spec.environment = &kEnvironmentAliases;
  spec.required = {"solver", "servers"};
  if (auto exit_code = pstrain::ParseFlags(pstrain::ArgsAfterName(argc, argv), spec, vm)) {
    return *exit_code;
  }
  const auto usage = [&spec](const std::string& m) { return pstrain::UsageError(spec, m); };
  auto memory_data_files = pstrain::ParseMemoryDataFlags(memory_data);
  if (!memory_data_files.ok()) return usage(memory_data_files.status().message());
  options.memory_data_files = std::move(memory_data_files.value());
  if (options.client.world_size < 1) return usage("--workers must be at least 1");
  if (io_threads < 1 || io_threads > pstrain::transport::kIoThreadsMax) {
    return usage("--io-threads must be in [1, " + std::to_string(pstrain::transport::kIoThreadsMax) +
                 "], got " + std::to_string(io_threads));
  }
  if (options.client.rank < 0 || options.client.rank >= options.client.world_size) {
    return usage("--rank must be in [0, " + std::to_string(options.client.world_size) + ")");
  }
  if (options.client.shared_memory_mb < 0 ||
      options.client.shared_memory_mb > pstrain::transport::kSharedRingMaxMb) {
    return usage("--shared-memory-mb must be in [0, " +
                 std::to_string(pstrain::transport::kSharedRingMaxMb) + "], got " +
                 std::to_string(options.client.shared_memory_mb));
  }
  auto parsed_mode = pstrain::ParseConsistencyMode(mode);
  if (!parsed_mode.ok()) return usage("--mode: " + parsed_mode.status().message());
  options.client.mode = parsed_mode.value();
  if (options.straggle_ms < 0 || options.straggle_jitter_ms < 0) {
    return usage("--straggle-ms and --straggle-jitter-ms must be >= 0");
  }
  if (engine != "auto" && engine != "fast" && engine != "reference") {
    return usage("--engine must be auto, fast or reference");
  }
  auto parsed_compression = pstrain::transport::ParseCompression(compression);
  if (!parsed_compression.ok()) {
    return usage("--compression: " + parsed_compression.status().message());
  }
  options.client.compression = parsed_compression.value();
  auto parsed_pull = pstrain::transport::ParsePullCompression(pull_compression);
  if (!parsed_pull.ok()) return usage("--pull-compression: " + parsed_pull.status().message());
  options.client.pull_compression = parsed_pull.value();
  auto parsed_gpu_ipc = pstrain::transport::ParseGpuIpcSwitch(gpu_ipc);
  if (!parsed_gpu_ipc.ok()) return usage(parsed_gpu_ipc.status().message());
  options.client.gpu_ipc = parsed_gpu_ipc.value();
  options.client.error_feedback = !no_error_feedback;
  auto parsed_elastic = pstrain::ParseElasticMethod(elastic);
  if (!parsed_elastic.ok()) return usage("--elastic: " + parsed_elastic.status().message());
  options.elastic.method = parsed_elastic.value();
  if (options.elastic.period < 1) return usage("--exchange-period must be at least 1");
  if (!(options.elastic.alpha > 0.f && options.elastic.alpha <= 1.f)) {
    return usage("--elastic-alpha must be in (0, 1]");
  }
  if (!(options.client.topk_ratio > 0 && options.client.topk_ratio <= 1)) {
    return usage("--topk-ratio must be in (0, 1], got " +
                 std::to_string(options.client.topk_ratio));
  }
  if (factor_right != "every_shard" && factor_right != "holder") {
    return usage("--factor-right must be every_shard or holder, got \"" + factor_right + "\"");
  }
  options.client.factor_right_holder = factor_right == "holder";
  if (options.client.factor_right_holder && !options.factor_broadcast) {
    return usage("--factor-right holder needs --factor-broadcast (R reaches the other shards "
                 "through the relay)");
  }
  if (!forward_shards.empty()) {
    if (!options.client.factor_right_holder) {
      return usage("--forward-shards needs --factor-right holder");
    }
    std::vector<std::string> parts;
    if (forward_shards != "none") boost::split(parts, forward_shards, boost::is_any_of(","));
    options.client.forward_shards.push_back(-1);  // given: none of its own unless listed
    for (const std::string& part : parts) {
      const int k = WholeNumber(part);
      if (k < 0) {
        return usage("--forward-shards: \"" + forward_shards + "\": shard numbers (0,2)");
      }
      options.client.forward_shards.push_back(k);
    }
  }
  if (timeout_s < 1) return usage("--timeout-s must be at least 1");
  if (!host_groups.empty()) {
    std::vector<std::string> parts;
    boost::split(parts, host_groups, boost::is_any_of(","));
    std::vector<int> group_of;
    int groups = 0;
    for (const std::string& p : parts) {
      const int g = WholeNumber(p);
      if (g < 0 || g > groups) {
        return usage("--host-groups: \"" + host_groups + "\": groups are numbered 0, 1, ... " +
                     "in order of first appearance");
      }
      groups = std::max(groups, g + 1);
      group_of.push_back(g);
    }
    if (static_cast<int>(group_of.size()) != options.client.world_size) {
      return usage("--host-groups: " + std::to_string(group_of.size()) + " groups for " +
                   std::to_string(options.client.world_size) + " workers");
    }
    if (host_group_shm.empty()) return usage("--host-groups needs --host-group-shm");
    const int me = options.client.rank;
    const int g = group_of[static_cast<size_t>(me)];
    options.host_group.rank = me;
    options.host_group.world_size = options.client.world_size;
    options.host_group.timeout = std::chrono::seconds(timeout_s);
    for (int r = 0; r < options.client.world_size; ++r) {
      if (group_of[static_cast<size_t>(r)] == g) options.host_group.ranks.push_back(r);
    }
    if (options.host_group.ranks.size() > 1) {
      options.host_group.name = host_group_shm + "-g" + std::to_string(g);
    }
    // To the servers this worker's group is one pusher.
    options.client.rank = g;
    options.client.world_size = groups;
  }
  boost::split(options.client.servers, servers, boost::is_any_of(","));
  options.client.job_key = job_key;
  options.client.timeout = std::chrono::seconds(timeout_s);
  options.engine = engine == "reference" ? pstrain::Engine::kReference : pstrain::Engine::kFast;
  const std::string rank = std::to_string(
      options.host_group.world_size > 0 ? options.host_group.rank : options.client.rank);
  const std::string program = "ps-worker " + rank;
  options.autotune.enabled = engine == "auto";
  options.autotune.cache_path = pstrain::AutotuneCachePathFromFlag(engine_cache);
  // Informational lines in glog's format (I, W), so that the job's Caffe
  // log (python/pstrain/caffelog.py) keeps their level.
  options.autotune.on_choice = [](const pstrain::ImplementationChoice& c) {
    pstrain::WriteGlogLine(stderr, 'I', PSTRAIN_GLOG_WHERE, c.Describe());
  };
  options.autotune.on_warning = [](const std::string& w) {
    pstrain::WriteGlogLine(stderr, 'W', PSTRAIN_GLOG_WHERE, "engine auto: " + w);
  };
  if (vm.count("gpu")) {
    const pstrain::Status s = pstrain::UseCudaDevice(gpu, "--gpu " + std::to_string(gpu));
    if (!s.ok()) return pstrain::ExitWith(s, program);
    options.engine = pstrain::Engine::kGpu;
  }
  options.on_notice = [](char level, const std::string& text) {
    pstrain::WriteGlogLine(stderr, level, PSTRAIN_GLOG_WHERE, text);
  };
  options.on_event = [&](const pstrain::TrainEvent& e) {
    std::printf("%s\n",
                pstrain::FormatEvent(e, json, {{"role", "worker"}, {"rank", rank}}).c_str());
    std::fflush(stdout);
  };
  if (!advertise.empty()) {
    const std::string message = "worker " + rank + " on " + advertise;
    if (json) {
      pstrain::JsonLine line;
      line.Add("event", "log").Add("role", "worker").Add("rank", rank).Add("message", message);
      std::printf("%s\n", line.str().c_str());
    } else {
      std::printf("[worker %s] %s\n", rank.c_str(), message.c_str());
    }
    std::fflush(stdout);
  }
  pstrain::SetCpuThreads(threads);
  if (pstrain::Status s = pstrain::transport::TuneMallocForLargeFrames(); !s.ok()) {
    std::fprintf(stderr, "ps-worker: warning: %s\n", s.message().c_str());
  }

  return pstrain::ExitOnOutOfMemory(program, [&] {
    pstrain::transport::Context context(io_threads);
    auto worker = pstrain::PsWorker::Create(context, options);
    if (!worker.ok()) return pstrain::ExitWith(worker.status(), program);
    return pstrain::ExitWith(worker.value()->Run(), program);
  });
}
