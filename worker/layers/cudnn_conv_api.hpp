// Which cuDNN API the convolutions' GPU path calls, process-wide (every
// build: without CUDA the setting exists and selects nothing).
//
//   kLegacy  cuDNN's convolution calls (cudnnFind*AlgorithmEx, cudnnConvolution*),
//            deprecated in cuDNN 9; the default: the GPU layer tests and
//            benchmarks of docs/benchmarks.md ran on it
//   kGraph   cuDNN's graph (backend) API: an operation graph per shape and
//            direction, engines from the heuristics filtered as the legacy
//            algorithms are, execution plans timed and cached
//            (worker/layers/cudnn_graph_conv.hpp)
//
// The environment variable PSTRAIN_CUDNN_API (legacy or graph) sets the
// starting value; a layer reads the setting when it prepares a bottom shape,
// so a change applies to shapes prepared afterwards. Where the graph API has
// no plan for a shape (or an operand is less aligned than the plan), the
// layer runs the legacy calls for it and counts a fallback.
#pragma once

#include <cstdint>
#include <string>

namespace pstrain {

enum class CudnnConvApi { kLegacy, kGraph };

CudnnConvApi GetCudnnConvApi();
void SetCudnnConvApi(CudnnConvApi api);
// "legacy" or "graph".
const char* CudnnConvApiName(CudnnConvApi api);

// What the graph path did in this process (all threads), for tests and logs.
struct CudnnGraphCounts {
  int64_t plan_sets = 0;  // (shape, direction) plan sets built and timed
  int64_t runs = 0;       // convolution calls run through a graph plan
  int64_t fallbacks = 0;  // calls that fell back to the legacy calls
};
CudnnGraphCounts GetCudnnGraphCounts();
void CountCudnnGraphPlanSet();
void CountCudnnGraphRun();
void CountCudnnGraphFallback();

}  // namespace pstrain
