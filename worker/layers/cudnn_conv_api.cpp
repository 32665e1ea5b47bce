// The process-wide cuDNN settings and the convolution path's counters: see
// cudnn_conv_api.hpp.
#include "worker/layers/cudnn_conv_api.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>

namespace pstrain {
namespace {

// A value other than legacy or graph is reported on stderr, naming the
// variable, and legacy kept.
CudnnConvApi ApiFromEnvironment() {
  const char* v = std::getenv("PSTRAIN_CUDNN_API");
  if (v == nullptr || *v == '\0') return CudnnConvApi::kLegacy;
  Result<CudnnConvApi> api = ParseCudnnConvApi(v, "PSTRAIN_CUDNN_API");
  if (api.ok()) return api.value();
  std::fprintf(stderr, "pstrain: %s; keeping legacy\n", api.status().message().c_str());
  return CudnnConvApi::kLegacy;
}

// As ApiFromEnvironment for PSTRAIN_CUDNN_NONDETERMINISTIC (0 or 1).
bool DeterministicFromEnvironment() {
  const char* v = std::getenv("PSTRAIN_CUDNN_NONDETERMINISTIC");
  if (v == nullptr || *v == '\0') return true;
  const std::string s(v);
  if (s == "1") return false;
  if (s != "0") {
    std::fprintf(stderr,
                 "pstrain: PSTRAIN_CUDNN_NONDETERMINISTIC=%s is not 0 or 1; keeping "
                 "deterministic cuDNN algorithms\n",
                 v);
  }
  return true;
}

std::atomic<int>& ApiSetting() {
  static std::atomic<int> api{static_cast<int>(ApiFromEnvironment())};
  return api;
}

std::atomic<bool>& DeterministicSetting() {
  static std::atomic<bool> deterministic{DeterministicFromEnvironment()};
  return deterministic;
}

std::atomic<int64_t> plan_sets{0}, runs{0}, fallbacks{0};
std::atomic<int64_t> algos_kept{0}, nondeterministic_kept{0}, nondeterministic_fastest{0};

}  // namespace

CudnnConvApi GetCudnnConvApi() { return static_cast<CudnnConvApi>(ApiSetting().load()); }
void SetCudnnConvApi(CudnnConvApi api) { ApiSetting().store(static_cast<int>(api)); }
const char* CudnnConvApiName(CudnnConvApi api) {
  return api == CudnnConvApi::kGraph ? "graph" : "legacy";
}

Result<CudnnConvApi> ParseCudnnConvApi(const std::string& value, const std::string& where) {
  if (value == "legacy") return CudnnConvApi::kLegacy;
  if (value == "graph") return CudnnConvApi::kGraph;
  return Status::InvalidArgument(where + ": '" + value + "' is not legacy or graph");
}

bool GetCudnnDeterministic() { return DeterministicSetting().load(); }
void SetCudnnDeterministic(bool deterministic) { DeterministicSetting().store(deterministic); }

CudnnGraphCounts GetCudnnGraphCounts() { return {plan_sets.load(), runs.load(), fallbacks.load()}; }
void CountCudnnGraphPlanSet() { ++plan_sets; }
void CountCudnnGraphRun() { ++runs; }
void CountCudnnGraphFallback() { ++fallbacks; }

CudnnAlgoCounts GetCudnnAlgoCounts() {
  return {algos_kept.load(), nondeterministic_kept.load(), nondeterministic_fastest.load()};
}
void CountCudnnAlgoList(int64_t kept, int64_t nondeterministic, bool nondeterministic_first) {
  algos_kept += kept;
  nondeterministic_kept += nondeterministic;
  if (nondeterministic_first) ++nondeterministic_fastest;
}

}  // namespace pstrain
