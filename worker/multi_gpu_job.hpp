// `ps-net train -gpu 0,1` and `-gpu all`: Caffe's multi-GPU training as a
// local parameter-server job. Caffe runs one solver per GPU, each with the
// solver's batch, and averages their gradients with NCCL before every update
// (synchronous SGD). The same numbers come from a bsp job with one worker per
// GPU and one CPU shard: every iteration the shard applies the solver's rule
// once to the mean of the workers' gradients. ps-net writes that job (YAML,
// docs/config-reference.md) from its flags and runs `ps-train` on it.
#pragma once

#include <string>
#include <vector>

#include "common/status.hpp"

namespace pstrain {

// Caffe's -gpu value: "all" (every device this machine has, in order) or
// device ids separated by commas ("0,1"; repeats allowed: workers may share
// a GPU). An error names the flag. REQUIRES: device_count >= 0.
Result<std::vector<int>> ParseGpuList(const std::string& flag_value, int device_count);

// What the generated job holds; paths absolute.
struct MultiGpuJob {
  std::string name;     // the run's name (the solver file's stem, made a valid name)
  std::string solver;   // the solver prototxt
  std::string weights;  // -weights: .caffemodel files, comma-separated ("" none)
  std::string output;   // the run folder's parent
  std::vector<int> gpus;
  std::string command_line;  // the ps-net command, for the job's comment
};

// The job for `solver_path` run from folder `cwd` (relative paths are
// Caffe's: from the working folder), `weights` as given to -weights.
MultiGpuJob MakeMultiGpuJob(const std::string& solver_path, const std::string& weights,
                            const std::vector<int>& gpus, const std::string& cwd,
                            const std::string& command_line);

// The job file: one CPU shard, one worker per GPU, bsp, Unix sockets when
// the run folder's path is short enough for them (else TCP on 127.0.0.1).
std::string MultiGpuJobYaml(const MultiGpuJob& job);

// Runs ps-train with `args` (after the program name) and waits for it:
// `ps-train` on PATH, else `python3 -m pstrain` (with the checkout's python/
// folder on PYTHONPATH when this program runs from a build folder inside a
// checkout). PSTRAIN_BUILD_DIR is set to this program's build (or install)
// folder, so ps-train runs the ps-worker and ps-server built beside it.
// Interrupts reach ps-train (it stops its processes); returns its exit code,
// or 128 + the signal that ended it. An error when neither can be started.
Result<int> RunPsTrain(const std::vector<std::string>& args);

}  // namespace pstrain
