// Which of cuDNN's measured convolution algorithms a layer may run: host code
// only (no cuDNN header), so that the rule is tested on every build.
//
// cudnnFind*AlgorithmEx returns one perf record per algorithm, fastest first.
// conv_layer.cu copies each into a ConvAlgoCandidate and keeps what
// FilterConvAlgorithms keeps, in cuDNN's order:
//   - the measurement succeeded;
//   - it needs at most `workspace_limit` bytes of workspace;
//   - plain FP32 math (tensor-op math, TF32 on Ampere and later, misses the
//     reference by ~1e-3);
//   - deterministic, unless `allow_nondeterministic` (then cuDNN's
//     CUDNN_NON_DETERMINISTIC algorithms, which sum with atomics, such as
//     backward-filter ALGO_0 and ALGO_3 and backward-data ALGO_0, may be picked
//     when they are faster: results then differ from run to run in the last bits).
#pragma once

#include <cstddef>
#include <vector>

namespace pstrain {

struct ConvAlgoCandidate {
  int algo = 0;  // any direction's cudnnConvolution*Algo_t, as int
  bool succeeded = false;
  size_t workspace = 0;  // bytes
  bool tensor_op_math = false;
  bool deterministic = true;
};

// One algorithm a layer may run, and the workspace it needs.
struct ConvAlgo {
  int algo = 0;
  size_t workspace = 0;
  bool deterministic = true;
};
using ConvAlgoList = std::vector<ConvAlgo>;  // fastest first

ConvAlgoList FilterConvAlgorithms(const std::vector<ConvAlgoCandidate>& measured,
                                  size_t workspace_limit, bool allow_nondeterministic);

}  // namespace pstrain
