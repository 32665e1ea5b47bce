// How the convolutions' GPU path uses cuDNN, process-wide (every build:
// without CUDA the settings exist and select nothing): which API it calls,
// and whether non-deterministic algorithms may run.
//
//   kLegacy  cuDNN's convolution calls (cudnnFind*AlgorithmEx, cudnnConvolution*),
//            deprecated in cuDNN 9; the default: the GPU layer tests and
//            benchmarks of docs/benchmarks.md ran on it
//   kGraph   cuDNN's graph (backend) API: an operation graph per shape and
//            direction, engines from the heuristics filtered as the legacy
//            algorithms are, execution plans timed and cached
//            (worker/layers/cudnn_graph_conv.hpp)
//
// Programs set both from their flags (ps-net --cudnn-api, --nondeterministic);
// the environment variables PSTRAIN_CUDNN_API (legacy or graph) and
// PSTRAIN_CUDNN_NONDETERMINISTIC (0 or 1) set the starting values. A layer
// reads the settings when it prepares a bottom shape, so a change applies to
// shapes prepared afterwards. Where the graph API has no plan for a shape (or
// an operand is less aligned than the plan), the layer runs the legacy calls
// for it and counts a fallback.
//
// Deterministic (the default): only algorithms cuDNN marks
// CUDNN_DETERMINISTIC run, so a rerun of a bsp job gives the same weights bit
// for bit. Non-deterministic: cuDNN's atomics-based algorithms may be picked
// where they measure faster (worker/layers/cudnn_algo_filter.hpp).
#pragma once

#include <cstdint>
#include <string>

#include "common/status.hpp"

namespace pstrain {

enum class CudnnConvApi { kLegacy, kGraph };

CudnnConvApi GetCudnnConvApi();
void SetCudnnConvApi(CudnnConvApi api);
// "legacy" or "graph".
const char* CudnnConvApiName(CudnnConvApi api);
// "legacy" or "graph"; anything else is InvalidArgument
// "<where>: '<value>' is not legacy or graph".
Result<CudnnConvApi> ParseCudnnConvApi(const std::string& value, const std::string& where);

// True (the default): deterministic cuDNN algorithms only.
bool GetCudnnDeterministic();
void SetCudnnDeterministic(bool deterministic);

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

// The algorithms the legacy path's measurements kept, in this process: how
// many of them cuDNN marks non-deterministic (0 while deterministic), and how
// many measured lists have a non-deterministic algorithm fastest (the one
// that runs).
struct CudnnAlgoCounts {
  int64_t kept = 0;
  int64_t nondeterministic_kept = 0;
  int64_t nondeterministic_fastest = 0;
};
CudnnAlgoCounts GetCudnnAlgoCounts();
void CountCudnnAlgoList(int64_t kept, int64_t nondeterministic_kept, bool nondeterministic_fastest);

}  // namespace pstrain
