#include "worker/layers/bnll_layer.hpp"

#include <algorithm>
#include <cmath>

#include "worker/layer_registry.hpp"

namespace pstrain {
namespace {
constexpr float kBnllThreshold = 50.f;  // Caffe's: exp() of more would overflow the gradient
}  // namespace

void BNLLLayer::ForwardReference(const BlobVec& bottom, const BlobVec& top) {
  KeepBottom(bottom, top);
  const float* x = bottom[0]->cpu_data();
  float* y = top[0]->mutable_cpu_data();
  const int64_t n = bottom[0]->count();
  for (int64_t i = 0; i < n; ++i) {
    y[i] = x[i] > 0.f ? x[i] + std::log1p(std::exp(-x[i])) : std::log1p(std::exp(x[i]));
  }
}

void BNLLLayer::BackwardReference(const BlobVec& top, const std::vector<bool>& propagate_down,
                                  const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  const float* x = BackwardInput(bottom).cpu_data();
  const float* dy = top[0]->cpu_diff();
  float* dx = bottom[0]->mutable_cpu_diff();
  const int64_t n = bottom[0]->count();
  for (int64_t i = 0; i < n; ++i) {
    const float e = std::exp(std::min(x[i], kBnllThreshold));
    dx[i] = dy[i] * e / (e + 1.f);
  }
}

PSTRAIN_REGISTER_LAYER("BNLL", BNLLLayer);

}  // namespace pstrain
