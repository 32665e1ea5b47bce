// ps-net: single-process tools over the net engine, like Caffe's `caffe`
// program.
//   ps-net train --solver S.prototxt [--weights W.caffemodel] [--snapshot X.solverstate]
//   ps-net train --solver S.prototxt --gpu 0,1|all [--weights W] [--dry-run]
//     (several GPUs: a local bsp parameter-server job, run by ps-train;
//     worker/multi_gpu_job.hpp)
//   ps-net check --solver S.prototxt [--weights W.caffemodel]
//     (builds the TRAIN and TEST nets with the solver's settings, reading only
//     the first record of each data source: worker/net_check.hpp)
//   ps-net test  --model M.prototxt --weights W.caffemodel [--iterations N]
//   ps-net time  --model M.prototxt [--iterations N] [--batch B] [--phase TRAIN|TEST]
//     (train, test and time take Caffe's --level N and --stage a,b: the net
//     state's level and stages, which a layer's include/exclude rules test;
//     train gives them to the solver's train_state, as Caffe's tool does)
//     (per layer: forward and backward ms and the implementation that ran;
//     on the GPU the total from whole passes that wait once, at their end)
//     [--nondeterministic] [--cudnn-api legacy|graph] [--cuda-graphs]
//     (train on one GPU takes --nondeterministic and --cudnn-api too)
//     (GPU: cuDNN may pick non-deterministic algorithms; which cuDNN API the
//     convolutions call; the whole passes launched as one captured CUDA graph:
//     worker/layers/cudnn_conv_api.hpp, worker/cuda_graph_pass.hpp)
//   ps-net diff  A.caffemodel B.caffemodel [--max-rel R]
//   ps-net devices (or device_query)
// Every command takes --gpu N to run the layers on CUDA device N (CUDA builds)
// and --engine auto|fast|reference (CPU; auto, the default: worker/net_autotune.hpp).
// Caffe's spellings work too: `-solver s.prototxt`, `-gpu=0` (common/command_line.hpp).
// `train` without --gpu honours the solver's `solver_mode: GPU` (device_id)
// on CUDA builds and refuses it on others.
// --help prints a command's options and --version "ps-net <version>"; both exit 0.
// Every command prints readable lines, or with --json one JSON object a line.
// `train` prints the same events as ps-worker (worker/train_event.hpp): its
// readable lines are Caffe's solver log in glog's format (worker/caffe_log.hpp),
// which Caffe's tools/extra/parse_log.py reads; engine auto's choices go to
// stderr, also in glog's format.
// Exit status (common/exit_code.hpp): 0 done, 1 a failure (the message names
// the file/place) or, for diff, files that differ, 2 bad command-line
// arguments, 3 training diverged.
#include <unistd.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "common/command_line.hpp"
#include "common/device.hpp"
#include "common/exit_code.hpp"
#include "common/glog_line.hpp"
#include "common/json_line.hpp"
#include "common/math_cpu.hpp"
#include "common/proto_io.hpp"
#ifdef PSTRAIN_HAVE_PYTHON_EMBED
#include "worker/python/python_embed.hpp"
#endif
#include "worker/caffe_log.hpp"
#include "worker/cuda_graph_pass.hpp"
#include "worker/layers/cudnn_conv_api.hpp"
#include "worker/layers/memory_data_layer.hpp"
#include "worker/model_diff.hpp"
#include "worker/multi_gpu_job.hpp"
#include "worker/net.hpp"
#include "worker/net_check.hpp"
#include "worker/net_timer.hpp"
#include "worker/trainer.hpp"
#include "worker/upgrade.hpp"

namespace po = boost::program_options;
using pstrain::JsonLine;
using pstrain::Status;

namespace {

struct CommonFlags {
  bool json = false;
  int threads = 0;
  std::string engine = "auto";
  std::string engine_cache;  // as given (AutotuneCachePathFromFlag)
  std::string gpu;           // as given: a device id (the GPU engine on it); train: a list or all
  int gpu_device = -1;       // >= 0: the GPU engine on this CUDA device (SelectEngine)
};

void AddCommon(po::options_description& desc, CommonFlags& flags,
               const char* gpu_help = "run on CUDA device N (overrides --engine)") {
  desc.add_options()("json", po::bool_switch(&flags.json), "print one JSON object a line")(
      "threads", po::value<int>(&flags.threads)->default_value(0), "CPU threads (0: all cores)")(
      "engine", po::value<std::string>(&flags.engine)->default_value("auto"),
      "layer engine: auto (the fastest CPU implementation of each layer, timed at set-up), "
      "fast (each layer's default: oneDNN) or reference")(
      "engine-cache", po::value<std::string>(&flags.engine_cache),
      "file of engine auto's choices (default ~/.cache/pstrain/cpu-implementations.tsv; "
      "'none': time in every run)")("gpu", po::value<std::string>(&flags.gpu), gpu_help);
}

// Engine auto's settings from the flags: choices logged to stderr, one line a layer.
pstrain::AutotuneOptions Autotune(const CommonFlags& flags, pstrain::Engine engine) {
  pstrain::AutotuneOptions autotune;
  autotune.enabled = flags.engine == "auto" && engine == pstrain::Engine::kFast;
  autotune.cache_path = pstrain::AutotuneCachePathFromFlag(flags.engine_cache);
  autotune.on_choice = [](const pstrain::ImplementationChoice& c) {
    pstrain::WriteGlogLine(stderr, 'I', PSTRAIN_GLOG_WHERE, c.Describe());
  };
  autotune.on_warning = [](const std::string& w) {
    pstrain::WriteGlogLine(stderr, 'W', PSTRAIN_GLOG_WHERE, "engine auto: " + w);
  };
  return autotune;
}

constexpr const char* kUsage =
    "usage: ps-net train|check|test|time|diff|devices|device_query [options] "
    "(ps-net COMMAND --help)\n";

// Prints the status's message; returns its exit code (common/exit_code.hpp).
int Fail(const Status& status) { return pstrain::ExitWith(status, "ps-net"); }

int Usage(const std::string& message, const po::options_description* desc = nullptr) {
  std::fprintf(stderr, "ps-net: %s\n", message.c_str());
  if (desc != nullptr) std::cerr << *desc;
  std::fprintf(stderr, "%s", kUsage);
  return pstrain::kExitUsage;
}

pstrain::Result<pstrain::Engine> ParseEngine(const std::string& name) {
  if (name == "fast" || name == "auto") return pstrain::Engine::kFast;
  if (name == "reference") return pstrain::Engine::kReference;
  return Status::Error("--engine must be 'auto', 'fast' or 'reference', got '" + name + "'");
}

// Why -gpu `flag` cannot run here: `device` absent, or no CUDA at all.
Status NoGpuFor(const std::string& flag, int device) {
  if (!pstrain::BuiltWithCuda()) {
    return Status::FailedPrecondition(
        "-gpu " + flag +
        ": this build has no CUDA; training on GPUs needs a CUDA build (cmake "
        "-DPSTRAIN_WITH_CUDA=ON) and the GPUs (ps-net devices lists them)");
  }
  if (flag == "all") return Status::FailedPrecondition("-gpu all: " + pstrain::DeviceSummary());
  return pstrain::CheckCudaDevice(device, "-gpu " + flag).WithContext("-gpu " + flag);
}

// Caffe's -phase (time only), -level and -stage: the NetState a net is built
// with (pycaffe's Net(file, phase, level=, stages=)).
struct NetStateFlags {
  std::string phase;  // TRAIN, TEST (or train, test)
  int level = 0;
  std::string stage;  // comma-separated stages
};

void AddNetState(po::options_description& desc, NetStateFlags& flags, bool with_phase) {
  if (with_phase) {
    desc.add_options()("phase", po::value<std::string>(&flags.phase)->default_value("TRAIN"),
                       "net phase: TRAIN or TEST (train, test)");
  }
  desc.add_options()("level", po::value<int>(&flags.level),
                     "net state level (layers' include/exclude min_level, max_level)")(
      "stage", po::value<std::string>(&flags.stage),
      "net state stages, comma-separated (layers' include/exclude stage, not_stage)");
}

// --memory-data (repeatable): MemoryData layers fed from .npy files.
void AddMemoryData(po::options_description& desc, std::vector<std::string>* values) {
  desc.add_options()("memory-data", po::value(values)->composing(),
                     "LAYER=DATA.npy,LABELS.npy: feed MemoryData layer LAYER from these .npy "
                     "files, mapped read-only (repeatable)");
}

// Parses --memory-data into `context`; a usage error's exit code, else 0.
int ApplyMemoryData(const std::vector<std::string>& values, pstrain::NetContext* context) {
  auto files = pstrain::ParseMemoryDataFlags(values);
  if (!files.ok()) return Usage(files.status().message());
  context->memory_data_files = std::move(files.value());
  return 0;
}

// Every --memory-data names a MemoryData layer of `net`.
Status CheckMemoryDataNamed(const pstrain::NetContext& context, const pstrain::Net& net,
                            const std::string& model) {
  for (const pstrain::MemoryDataFiles& files : context.memory_data_files) {
    const pstrain::Layer* found = net.layer_by_name(files.layer);
    if (found == nullptr || std::string(found->type()) != "MemoryData") {
      return Status::InvalidArgument("--memory-data " + files.layer + "=" + files.data + "," +
                                     files.labels + ": " + model + " has no MemoryData layer '" +
                                     files.layer + "'");
    }
  }
  return Status::Ok();
}

pstrain::Result<caffe::Phase> ParsePhase(const std::string& name) {
  if (name == "TRAIN" || name == "train") return caffe::TRAIN;
  if (name == "TEST" || name == "test") return caffe::TEST;
  return Status::Error("--phase must be TRAIN or TEST (or train, test), got '" + name + "'");
}

// The stages of --stage "a,b": {"a", "b"}; "" gives none.
pstrain::Result<std::vector<std::string>> ParseStages(const std::string& list) {
  std::vector<std::string> stages;
  if (list.empty()) return stages;
  size_t begin = 0;
  while (true) {
    const size_t comma = list.find(',', begin);
    const std::string stage = list.substr(begin, comma - begin);
    if (stage.empty()) return Status::Error("--stage '" + list + "': a stage name is empty");
    stages.push_back(stage);
    if (comma == std::string::npos) return stages;
    begin = comma + 1;
  }
}

// Adds --level (when given) and --stage to `state`, as pycaffe's Net does
// with level= and stages=; sets its phase from --phase when `with_phase`.
// Returns 0, or the usage exit status for a bad flag.
int ApplyNetState(const NetStateFlags& flags, const po::variables_map& vm, bool with_phase,
                  caffe::NetState* state) {
  if (with_phase) {
    auto phase = ParsePhase(flags.phase);
    if (!phase.ok()) return Usage(phase.status().message());
    state->set_phase(phase.value());
  }
  auto stages = ParseStages(flags.stage);
  if (!stages.ok()) return Usage(stages.status().message());
  if (vm.count("level")) state->set_level(flags.level);
  for (const std::string& stage : stages.value()) state->add_stage(stage);
  return 0;
}

// The engine the flags ask for; with --gpu N, selects device N first. Returns
// 0 and sets *engine, or an exit status (2 bad --engine or --gpu, 1 no usable GPU).
int SelectEngine(CommonFlags& flags, pstrain::Engine* engine) {
  if (!flags.gpu.empty()) {
    auto gpus = pstrain::ParseGpuList(flags.gpu, pstrain::CudaDeviceCount());
    if (!gpus.ok()) return Usage(gpus.status().message());
    if (flags.gpu == "all" && gpus.value().empty()) return Fail(NoGpuFor("all", 0));
    if (gpus.value().size() != 1) {
      return Usage("-gpu " + flags.gpu + ": this command runs on one GPU (give -gpu N)");
    }
    flags.gpu_device = gpus.value()[0];
    const Status s = pstrain::UseCudaDevice(flags.gpu_device, "--gpu " + flags.gpu);
    if (!s.ok()) return Fail(s);
    *engine = pstrain::Engine::kGpu;
    return 0;
  }
  auto parsed = ParseEngine(flags.engine);
  if (!parsed.ok()) return Usage(parsed.status().message());
  *engine = parsed.value();
  return 0;
}

// Parses the flags of one command (pstrain::ParseFlags; a usage error also
// prints the command's options); returns 0 to go on, -1 when help or the
// version was printed, else an exit status.
int ParseFlags(int argc, char** argv, po::options_description& desc, po::variables_map& vm,
               const std::vector<std::string>& required,
               const po::positional_options_description& positional = {}) {
  pstrain::FlagSpec spec;
  spec.program = "ps-net";
  spec.options = &desc;
  spec.positional = positional;
  spec.required = required;
  spec.usage = [&desc](const std::string& message) { return Usage(message, &desc); };
  const auto exit_code = pstrain::ParseFlags(pstrain::ArgsAfterName(argc, argv), spec, vm);
  if (!exit_code) return 0;
  return *exit_code == 0 ? -1 : *exit_code;
}

// A train event as a JSON line (--json), else as Caffe's solver logs it.
void PrintEvent(const pstrain::TrainEvent& e, bool json, pstrain::CaffeLog* log) {
  if (json) {
    std::printf("%s\n", pstrain::FormatEvent(e, true).c_str());
  } else {
    for (const auto& line : log->Lines(e)) std::printf("%s\n", line.c_str());
  }
  std::fflush(stdout);
}

std::string CurrentFolder() {
  std::error_code error;
  const std::string cwd = std::filesystem::current_path(error).string();
  return error ? "." : cwd;
}

// The ps-net command line, for the generated job's comment.
std::string CommandLine(int argc, char** argv) {
  std::string line = "generated by: ps-net";
  for (int i = 0; i < argc; ++i) line += std::string(" ") + argv[i];
  return line;
}

// A .solverstate inside a run folder's snapshots/ (a ps-train run): that run
// folder, else "".
std::string RunFolderOf(const std::string& solverstate) {
  const std::filesystem::path snapshots = std::filesystem::absolute(solverstate).parent_path();
  if (snapshots.filename() != "snapshots") return "";
  const std::filesystem::path run = snapshots.parent_path();
  return std::filesystem::exists(run / "job.resolved.yaml") ? run.string() : "";
}

// `ps-net train -gpu 0,1`: Caffe's multi-GPU training as a local bsp
// parameter-server job run by ps-train (worker/multi_gpu_job.hpp).
int TrainOnGpus(const std::vector<int>& gpus, const std::string& flag, const std::string& solver,
                const std::string& weights, const std::string& snapshot, bool dry_run,
                const std::string& command_line) {
  const pstrain::MultiGpuJob job =
      pstrain::MakeMultiGpuJob(solver, weights, gpus, CurrentFolder(), command_line);
  const std::string yaml = pstrain::MultiGpuJobYaml(job);
  std::vector<std::string> args;
  std::string job_file;
  if (!snapshot.empty()) {
    const std::string run = RunFolderOf(snapshot);
    if (run.empty()) {
      return Usage("-snapshot with -gpu " + flag + ": a parameter-server job resumes from its " +
                   "run folder; " + snapshot +
                   " is not in a run folder's snapshots/ (resume a ps-train run with "
                   "ps-net train -gpu ... -snapshot RUN/snapshots/X.solverstate, or "
                   "ps-train --resume RUN)");
    }
    args = {"--resume", run};
  } else {
    if (dry_run) std::printf("# the job ps-net generates\n%s\n", yaml.c_str());
    char path[] = "/tmp/ps-net-job-XXXXXX.yaml";
    const int fd = ::mkstemps(path, 5);
    if (fd < 0)
      return Fail(Status::IOError(std::string("cannot create a job file in /tmp: ") +
                                  std::strerror(errno)));
    job_file = path;
    const bool written = ::write(fd, yaml.data(), yaml.size()) == static_cast<ssize_t>(yaml.size());
    ::close(fd);
    if (!written) {
      std::remove(path);
      return Fail(Status::IOError(job_file + ": cannot write the job"));
    }
    args = {job_file};
  }
  // Each GPU must exist here, as Caffe checks -gpu.
  for (int gpu : gpus) {
    if (pstrain::CheckCudaDevice(gpu, "-gpu " + flag).ok()) continue;
    if (!job_file.empty()) std::remove(job_file.c_str());
    return Fail(NoGpuFor(flag, gpu));
  }
  if (dry_run) args.push_back("--dry-run");
  if (!dry_run) {
    pstrain::WriteGlogLine(stdout, 'I', PSTRAIN_GLOG_WHERE,
                           "-gpu " + flag + ": training on " + std::to_string(gpus.size()) +
                               " GPUs as a bsp parameter-server job (one worker per GPU, one "
                               "CPU shard): ps-train " +
                               args[0]);
  }
  std::fflush(stdout);
  auto code = pstrain::RunPsTrain(args);
  if (!job_file.empty()) std::remove(job_file.c_str());
  if (!code.ok()) return Fail(code.status());
  return code.value();
}

// How the GPU engine uses cuDNN (ps-net train and time) and CUDA graphs (time).
struct GpuRunFlags {
  bool nondeterministic = false;
  std::string cudnn_api;  // when given; else the process's setting (PSTRAIN_CUDNN_API or legacy)
  bool cuda_graphs = false;
};

void AddGpuRun(po::options_description& desc, GpuRunFlags& flags, bool with_cuda_graphs) {
  desc.add_options()("nondeterministic", po::bool_switch(&flags.nondeterministic),
                     "let cuDNN pick non-deterministic (atomics) convolution algorithms "
                     "where faster; results then vary in the last bits from run to run")(
      "cudnn-api", po::value<std::string>(&flags.cudnn_api),
      "legacy or graph: which cuDNN API the convolutions call (default legacy)");
  if (!with_cuda_graphs) return;
  desc.add_options()(
      "cuda-graphs", po::bool_switch(&flags.cuda_graphs),
      "with --gpu: capture the whole forward+backward pass once and launch it as a CUDA graph");
}

// Sets the process's cuDNN settings from the flags; 0, or 2 (usage) for a bad value.
int ApplyGpuRun(const GpuRunFlags& flags, const CommonFlags& common, const po::variables_map& vm) {
  if (flags.cuda_graphs && common.gpu_device < 0) {
    return Usage("--cuda-graphs goes with --gpu N (a CUDA graph replays GPU work)");
  }
  if (vm.count("cudnn-api") > 0) {
    auto api = pstrain::ParseCudnnConvApi(flags.cudnn_api, "--cudnn-api");
    if (!api.ok()) return Usage(api.status().message());
    pstrain::SetCudnnConvApi(api.value());
  }
  if (flags.nondeterministic) pstrain::SetCudnnDeterministic(false);
  return 0;
}

int Train(int argc, char** argv) {
  CommonFlags common;
  NetStateFlags net_state;
  GpuRunFlags gpu_run;
  std::string solver, weights, snapshot;
  std::vector<std::string> memory_data;
  bool dry_run = false;
  po::options_description desc("ps-net train");
  desc.add_options()("solver", po::value<std::string>(&solver), "solver prototxt")(
      "weights", po::value<std::string>(&weights),
      "initial weights: .caffemodel files, comma-separated (replaces the solver's weights)")(
      "snapshot", po::value<std::string>(&snapshot), "resume from a .solverstate")(
      "dry-run", po::bool_switch(&dry_run),
      "with --gpu 0,1 or all: print the generated job and ps-train's dry run; start nothing");
  AddNetState(desc, net_state, false);
  AddMemoryData(desc, &memory_data);
  AddGpuRun(desc, gpu_run, false);
  AddCommon(desc, common,
            "run on CUDA device N; several (0,1) or all: a local bsp parameter-server job "
            "with one worker per GPU, run by ps-train");
  po::variables_map vm;
  if (int rc = ParseFlags(argc, argv, desc, vm, {"solver"}); rc != 0) return rc < 0 ? 0 : rc;
  if (!weights.empty() && !snapshot.empty()) return Usage("give --weights or --snapshot, not both");
  caffe::NetState flag_state;  // --level and --stage (no phase)
  if (int rc = ApplyNetState(net_state, vm, false, &flag_state); rc != 0) return rc;
  if (!common.gpu.empty()) {
    auto gpus = pstrain::ParseGpuList(common.gpu, pstrain::CudaDeviceCount());
    if (!gpus.ok()) return Usage(gpus.status().message());
    if (common.gpu == "all" && gpus.value().empty()) return Fail(NoGpuFor("all", 0));
    if (gpus.value().size() > 1) {
      if (!memory_data.empty()) {
        return Usage("--memory-data goes with one GPU or the CPU; with -gpu " + common.gpu +
                     " start ps-worker with --memory-data");
      }
      if (common.json) return Usage("--json goes with one GPU; ps-train writes the job's metrics");
      if (vm.count("level") || vm.count("stage")) {
        return Usage("--level and --stage go with one GPU; with -gpu " + common.gpu +
                     " set the solver's train_state { level stage } instead");
      }
      if (gpu_run.nondeterministic || vm.count("cudnn-api")) {
        return Usage("--nondeterministic and --cudnn-api go with one GPU; with -gpu " + common.gpu +
                     " the workers take PSTRAIN_CUDNN_NONDETERMINISTIC and " +
                     "PSTRAIN_CUDNN_API from the environment");
      }
      return TrainOnGpus(gpus.value(), common.gpu, solver, weights, snapshot, dry_run,
                         CommandLine(argc, argv));
    }
    common.gpu = std::to_string(gpus.value()[0]);  // -gpu all on a machine with one GPU
  }
  if (dry_run) return Usage("--dry-run goes with --gpu 0,1 or --gpu all (a ps-train job)");
  pstrain::Engine engine = pstrain::Engine::kFast;
  if (int rc = SelectEngine(common, &engine); rc != 0) return rc;
  if (int rc = ApplyGpuRun(gpu_run, common, vm); rc != 0) return rc;
  pstrain::SetCpuThreads(common.threads);

  pstrain::CaffeLog log;
  pstrain::TrainerOptions options;
  options.engine = engine;
  options.autotune = Autotune(common, engine);
  options.resume_from = snapshot;
  options.weights = weights;
  options.on_event = [&](const pstrain::TrainEvent& e) { PrintEvent(e, common.json, &log); };
  if (int rc = ApplyMemoryData(memory_data, &options.context); rc != 0) return rc;
  // As Caffe's tool: --level and --stage go into the solver's train_state.
  caffe::SolverParameter solver_param;
  std::map<std::string, int> solver_lines;
  Status read = pstrain::ReadTextProtoWithFieldLines(solver, &solver_param, &solver_lines);
  if (!read.ok()) return Fail(read);
  solver_param.mutable_train_state()->MergeFrom(flag_state);  // level replaced, stages added
  auto trainer = pstrain::Trainer::Create(solver_param, solver, options, solver_lines);
  if (!trainer.ok()) return Fail(trainer.status());
  if (!common.json) {
    const caffe::SolverParameter& param = trainer.value()->solver();
    for (const auto& line : log.Start(trainer.value()->net().name(), param.lr_policy())) {
      std::printf("%s\n", line.c_str());
    }
    std::fflush(stdout);
  }
  Status s = trainer.value()->Solve();
  if (!s.ok()) return Fail(s);
  return 0;
}

// Builds the solver's nets without training (worker/net_check.hpp): exit 0
// and one line (or JSON object) describing them (the inputs: the shapes the
// Data layers deliver, from their first records), else the first problem
// with its file:line and exit 1.
int Check(int argc, char** argv) {
  std::string solver, weights;
  bool json = false;
  po::options_description desc("ps-net check");
  desc.add_options()("solver", po::value<std::string>(&solver), "solver prototxt")(
      "weights", po::value<std::string>(&weights),
      "initial weights to load as ps-net train would (replaces the solver's weights)")(
      "json", po::bool_switch(&json), "print one JSON object");
  po::variables_map vm;
  if (int rc = ParseFlags(argc, argv, desc, vm, {"solver"}); rc != 0) return rc < 0 ? 0 : rc;
  pstrain::SetCpuThreads(1);
  pstrain::SolverCheckOptions options;
  options.weights = weights;
  auto checked = pstrain::CheckSolver(solver, options);
  if (!checked.ok()) return Fail(checked.status());
  const pstrain::SolverCheck& c = checked.value();
  std::string outputs, inputs;
  for (const auto& o : c.outputs) outputs += (outputs.empty() ? "" : ", ") + o;
  for (const auto& i : c.inputs) inputs += (inputs.empty() ? "" : ", ") + i;
  if (json) {
    std::printf("%s\n", JsonLine()
                            .Add("event", "check")
                            .Add("solver", solver)
                            .Add("net", c.train_net)
                            .Add("layers", c.train_layers)
                            .Add("learnable_values", c.learnable_values)
                            .Add("test_nets", c.test_nets)
                            .Add("inputs", inputs)
                            .Add("outputs", outputs)
                            .str()
                            .c_str());
  } else {
    std::printf(
        "%s: ok: TRAIN net '%s' (%d layers, %lld learnable values, inputs %s, outputs %s), "
        "%d TEST net%s\n",
        solver.c_str(), c.train_net.c_str(), c.train_layers,
        static_cast<long long>(c.learnable_values), inputs.empty() ? "none" : inputs.c_str(),
        outputs.empty() ? "none" : outputs.c_str(), c.test_nets, c.test_nets == 1 ? "" : "s");
  }
  return 0;
}

int Test(int argc, char** argv) {
  CommonFlags common;
  NetStateFlags net_state;
  std::string model, weights;
  int iterations = 50;
  std::vector<std::string> memory_data;
  po::options_description desc("ps-net test");
  desc.add_options()("model", po::value<std::string>(&model), "net prototxt (TEST phase)")(
      "weights", po::value<std::string>(&weights), "trained weights (.caffemodel)")(
      "iterations", po::value<int>(&iterations)->default_value(50), "test batches to run");
  AddNetState(desc, net_state, false);
  AddMemoryData(desc, &memory_data);
  AddCommon(desc, common);
  po::variables_map vm;
  if (int rc = ParseFlags(argc, argv, desc, vm, {"model", "weights"}); rc != 0) {
    return rc < 0 ? 0 : rc;
  }
  if (iterations < 1) return Usage("--iterations must be at least 1");
  pstrain::Engine engine = pstrain::Engine::kFast;
  if (int rc = SelectEngine(common, &engine); rc != 0) return rc;
  pstrain::SetCpuThreads(common.threads);

  pstrain::NetOptions options;
  options.state.set_phase(caffe::TEST);
  if (int rc = ApplyNetState(net_state, vm, false, &options.state); rc != 0) return rc;
  options.context.engine = engine;
  options.autotune = Autotune(common, engine);
  if (int rc = ApplyMemoryData(memory_data, &options.context); rc != 0) return rc;
  auto net = pstrain::Net::FromFile(model, options);
  if (!net.ok()) return Fail(net.status());
  if (Status named = CheckMemoryDataNamed(options.context, *net.value(), model); !named.ok()) {
    return Fail(named);
  }
  Status s = net.value()->CopyTrainedLayersFromFile(weights);
  if (!s.ok()) return Fail(s);
  std::map<std::string, double> sums;
  std::vector<std::string> order;
  double loss = 0;
  for (int i = 0; i < iterations; ++i) {
    loss += net.value()->Forward();
    s = net.value()->RuntimeStatus();
    if (!s.ok()) return Fail(s);
    for (const auto& name : net.value()->output_blob_names()) {
      const pstrain::Blob* blob = net.value()->blob_by_name(name);
      for (int64_t k = 0; k < blob->count(); ++k) {
        std::string key = name + (blob->count() > 1 ? "[" + std::to_string(k) + "]" : "");
        if (!sums.count(key)) order.push_back(key);
        sums[key] += blob->cpu_data()[k];
      }
    }
  }
  JsonLine line;
  line.Add("event", "test").Add("iterations", iterations);
  for (const auto& key : order) {
    const double mean = sums[key] / iterations;
    if (common.json) {
      line.Add(key, mean);
    } else {
      std::printf("%s = %.6g\n", key.c_str(), mean);
    }
  }
  if (common.json) {
    line.Add("loss", loss / iterations);
    std::printf("%s\n", line.str().c_str());
  } else {
    std::printf("Loss: %.6g\n", loss / iterations);
  }
  return 0;
}

int Time(int argc, char** argv) {
  CommonFlags common;
  NetStateFlags net_state;
  GpuRunFlags gpu_run;
  std::string model;
  int iterations = 50;
  int batch = 0;
  std::vector<std::string> memory_data;
  po::options_description desc("ps-net time");
  desc.add_options()("model", po::value<std::string>(&model), "net prototxt")(
      "iterations", po::value<int>(&iterations)->default_value(50), "timed iterations")(
      "batch", po::value<int>(&batch)->default_value(0),
      "batch size for Input/DummyData/Data layers (0: as in the file)");
  AddNetState(desc, net_state, true);
  AddMemoryData(desc, &memory_data);
  AddGpuRun(desc, gpu_run, true);
  AddCommon(desc, common);
  po::variables_map vm;
  if (int rc = ParseFlags(argc, argv, desc, vm, {"model"}); rc != 0) return rc < 0 ? 0 : rc;
  if (iterations < 1) return Usage("--iterations must be at least 1");
  if (batch < 0) return Usage("--batch must be >= 0");
  pstrain::NetOptions options;
  if (int rc = ApplyNetState(net_state, vm, true, &options.state); rc != 0) return rc;
  pstrain::Engine engine = pstrain::Engine::kFast;
  if (int rc = SelectEngine(common, &engine); rc != 0) return rc;
  if (int rc = ApplyGpuRun(gpu_run, common, vm); rc != 0) return rc;
  pstrain::SetCpuThreads(common.threads);

  caffe::NetParameter param;
  std::vector<int> lines;
  Status s = pstrain::ReadTextProtoWithLines(model, &param, "layer", &lines);
  if (!s.ok()) return Fail(s);
  if (pstrain::NetNeedsUpgrade(param)) {
    s = pstrain::UpgradeNet(&param, model);
    if (!s.ok()) return Fail(s);
    lines.clear();
  }
  if (batch > 0) pstrain::OverrideBatchSize(&param, batch);
  options.context.engine = engine;
  options.autotune = Autotune(common, engine);
  options.autotune.backward = pstrain::AutotuneBackward::kAsNetTimer;  // TimeNet's passes
  options.source = model;
  options.layer_lines = lines;
  if (int rc = ApplyMemoryData(memory_data, &options.context); rc != 0) return rc;
  auto net = pstrain::Net::Create(param, options);
  if (!net.ok()) return Fail(net.status());
  if (Status named = CheckMemoryDataNamed(options.context, *net.value(), model); !named.ok()) {
    return Fail(named);
  }
  pstrain::NetTimerOptions timer;
  if (engine == pstrain::Engine::kGpu) timer.sync = pstrain::SynchronizeGpu;
  pstrain::CudaGraphPass graph;
  if (gpu_run.cuda_graphs) {
    timer.run_whole_pass = [&](const std::function<void()>& pass) { return graph.Run(pass); };
  }
  auto timed = pstrain::TimeNet(*net.value(), iterations, timer);
  if (!timed.ok()) return Fail(timed.status());
  const pstrain::NetTime& t = timed.value();
  // A layer that failed while timed (a Python layer that raised) voids the figures.
  if (Status s = net.value()->RuntimeStatus(); !s.ok()) return Fail(s);
  // "on" (the whole passes ran as a graph), "off", or "fallback" (logged with its reason).
  const char* graphs = !gpu_run.cuda_graphs ? "off" : graph.captured() ? "on" : "fallback";
  if (gpu_run.cuda_graphs && !graph.captured()) {
    std::fprintf(stderr, "ps-net time: --cuda-graphs: the whole passes ran without a graph: %s\n",
                 graph.fallback_reason().c_str());
  }
  const bool deterministic = pstrain::GetCudnnDeterministic();
  const char* api = pstrain::CudnnConvApiName(pstrain::GetCudnnConvApi());
  for (const auto& layer : t.layers) {
    if (common.json) {
      std::printf("%s\n", JsonLine()
                              .Add("event", "layer_time")
                              .Add("layer", layer.name)
                              .Add("type", layer.type)
                              .Add("forward_ms", layer.forward_ms)
                              .Add("backward_ms", layer.backward_ms)
                              .Add("implementation", layer.implementation)
                              .str()
                              .c_str());
    } else {
      std::printf("%24s %-18s forward: %9.4f ms  backward: %9.4f ms  %s\n", layer.name.c_str(),
                  layer.type.c_str(), layer.forward_ms, layer.backward_ms,
                  layer.implementation.c_str());
    }
  }
  if (common.json) {
    std::printf("%s\n", JsonLine()
                            .Add("event", "time")
                            .Add("model", model)
                            .Add("iterations", t.iterations)
                            .Add("threads", pstrain::CpuThreads())
                            .Add("engine", common.gpu_device >= 0 ? "gpu" : common.engine)
                            .Add("forward_ms", t.forward_ms)
                            .Add("backward_ms", t.backward_ms)
                            .Add("total_ms", t.total_ms)
                            .Add("median_total_ms", t.median_total_ms)
                            .Add("whole_passes", t.whole_passes)
                            .Add("cudnn_deterministic", deterministic)
                            .Add("cudnn_api", api)
                            .Add("cuda_graphs", graphs)
                            .Add("graph_launches", graph.launches())
                            .str()
                            .c_str());
  } else {
    std::printf("Average Forward pass: %.4f ms\n", t.forward_ms);
    std::printf("Average Backward pass: %.4f ms\n", t.backward_ms);
    std::printf("Average Forward-Backward: %.4f ms (median %.4f ms, %d iterations, %d threads)\n",
                t.total_ms, t.median_total_ms, t.iterations, pstrain::CpuThreads());
    if (engine == pstrain::Engine::kGpu) {
      std::printf("GPU: whole passes %s, cuDNN %s algorithms, %s API, CUDA graphs %s\n",
                  t.whole_passes ? "timed apart" : "not timed apart",
                  deterministic ? "deterministic" : "non-deterministic allowed", api, graphs);
    }
  }
  return 0;
}

// Compares the learned blobs of two .caffemodel files (CompareModels):
// prints the largest absolute and relative differences and every mismatch
// (NaN, a layer or blob in one file only, shapes that differ). Exit status 0
// when the files are equal (every relative difference <= --max-rel, default
// 0), 1 when they differ or a file cannot be read.
int Diff(int argc, char** argv) {
  CommonFlags common;
  double max_rel = 0;
  po::options_description desc("ps-net diff A.caffemodel B.caffemodel");
  std::vector<std::string> files;
  desc.add_options()("files", po::value(&files)->multitoken(), "two .caffemodel files")(
      "max-rel", po::value<double>(&max_rel)->default_value(0),
      "largest relative difference that counts as equal");
  AddCommon(desc, common);
  po::positional_options_description positional;
  positional.add("files", 2);
  po::variables_map vm;
  if (int rc = ParseFlags(argc, argv, desc, vm, {}, positional); rc != 0) return rc < 0 ? 0 : rc;
  if (files.size() != 2) return Usage("diff takes two .caffemodel files", &desc);
  if (!(max_rel >= 0)) return Usage("--max-rel must be >= 0");
  auto compared = pstrain::CompareModelFiles(files[0], files[1]);
  if (!compared.ok()) return Fail(compared.status());
  const pstrain::ModelDiff& d = compared.value();
  const bool equal = d.Equal(max_rel);
  if (common.json) {
    std::string mismatches;
    for (const auto& m : d.mismatches) {
      mismatches += (mismatches.empty() ? "" : ",") + JsonLine::Quote(m);
    }
    std::printf("%s\n", JsonLine()
                            .Add("event", "diff")
                            .Add("blobs", d.blobs_compared)
                            .Add("max_abs", d.max_abs)
                            .Add("max_rel", d.max_rel)
                            .Add("worst", d.worst)
                            .Add("equal", equal)
                            .AddRaw("mismatches", "[" + mismatches + "]")
                            .str()
                            .c_str());
  } else {
    std::printf("%d blobs compared: max |a-b| = %.9g, max relative = %.9g (%s)\n", d.blobs_compared,
                d.max_abs, d.max_rel, d.worst.c_str());
    for (const auto& m : d.mismatches) std::printf("mismatch: %s\n", m.c_str());
    if (!equal) std::printf("%s and %s differ\n", files[0].c_str(), files[1].c_str());
  }
  return equal ? 0 : 1;
}

// What this build and machine offer: {"event":"devices","cuda_build":...,"cuda_devices":N}.
int Devices(int argc, char** argv) {
  CommonFlags common;
  po::options_description desc("ps-net devices");
  AddCommon(desc, common);
  po::variables_map vm;
  if (int rc = ParseFlags(argc, argv, desc, vm, {}); rc != 0) return rc < 0 ? 0 : rc;
  const int count = pstrain::CudaDeviceCount();
  if (common.json) {
    std::printf("%s\n", JsonLine()
                            .Add("event", "devices")
                            .Add("cuda_build", pstrain::BuiltWithCuda())
                            .Add("cuda_devices", count)
                            .Add("summary", pstrain::DeviceSummary())
                            .str()
                            .c_str());
  } else {
    std::printf("CUDA build: %s; %s\n", pstrain::BuiltWithCuda() ? "yes" : "no",
                pstrain::DeviceSummary().c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
#ifdef PSTRAIN_HAVE_PYTHON_EMBED
  pstrain::EnablePythonLayers(argv[0]);
#endif
  if (argc < 2) return Usage("missing command");
  const std::string command = argv[1];
  if (command == "--help" || command == "-h" || command == "-help" || command == "help") {
    std::printf("%s", kUsage);
    return 0;
  }
  if (command == "--version" || command == "-version") {
    std::printf("%s\n", pstrain::VersionLine("ps-net").c_str());
    return 0;
  }
  // Out of memory in any command: one line naming the request, exit 1.
  if (command == "train") {
    return pstrain::ExitOnOutOfMemory("ps-net", [&] { return Train(argc - 1, argv + 1); });
  }
  if (command == "check") return Check(argc - 1, argv + 1);
  if (command == "test") {
    return pstrain::ExitOnOutOfMemory("ps-net", [&] { return Test(argc - 1, argv + 1); });
  }
  if (command == "time") {
    return pstrain::ExitOnOutOfMemory("ps-net", [&] { return Time(argc - 1, argv + 1); });
  }
  if (command == "diff") return Diff(argc - 1, argv + 1);
  if (command == "devices" || command == "device_query") return Devices(argc - 1, argv + 1);
  return Usage("unknown command '" + command + "'");
}
