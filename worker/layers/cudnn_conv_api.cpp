// The process-wide cuDNN API choice and the graph path's counters: see
// cudnn_conv_api.hpp.
#include "worker/layers/cudnn_conv_api.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>

namespace pstrain {
namespace {

// A value other than legacy or graph is reported on stderr, naming the
// variable, and legacy kept.
CudnnConvApi FromEnvironment() {
  const char* v = std::getenv("PSTRAIN_CUDNN_API");
  if (v == nullptr || *v == '\0') return CudnnConvApi::kLegacy;
  const std::string s(v);
  if (s == "graph") return CudnnConvApi::kGraph;
  if (s != "legacy") {
    std::fprintf(stderr, "pstrain: PSTRAIN_CUDNN_API=%s is not legacy or graph; keeping legacy\n",
                 v);
  }
  return CudnnConvApi::kLegacy;
}

std::atomic<int>& Setting() {
  static std::atomic<int> api{static_cast<int>(FromEnvironment())};
  return api;
}

std::atomic<int64_t> plan_sets{0}, runs{0}, fallbacks{0};

}  // namespace

CudnnConvApi GetCudnnConvApi() { return static_cast<CudnnConvApi>(Setting().load()); }
void SetCudnnConvApi(CudnnConvApi api) { Setting().store(static_cast<int>(api)); }
const char* CudnnConvApiName(CudnnConvApi api) {
  return api == CudnnConvApi::kGraph ? "graph" : "legacy";
}

CudnnGraphCounts GetCudnnGraphCounts() { return {plan_sets.load(), runs.load(), fallbacks.load()}; }
void CountCudnnGraphPlanSet() { ++plan_sets; }
void CountCudnnGraphRun() { ++runs; }
void CountCudnnGraphFallback() { ++fallbacks; }

}  // namespace pstrain
