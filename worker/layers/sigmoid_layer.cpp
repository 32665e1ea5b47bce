#include "worker/layers/sigmoid_layer.hpp"

#include <cmath>

#include "worker/layer_registry.hpp"

namespace pstrain {

void SigmoidLayer::ForwardReference(const BlobVec& bottom, const BlobVec& top) {
  const float* x = bottom[0]->cpu_data();
  float* y = top[0]->mutable_cpu_data();
  const int64_t n = bottom[0]->count();
  // 0.5 * tanh(0.5 x) + 0.5 equals 1 / (1 + exp(-x)) and never overflows.
  for (int64_t i = 0; i < n; ++i) y[i] = 0.5f * std::tanh(0.5f * x[i]) + 0.5f;
}

void SigmoidLayer::BackwardReference(const BlobVec& top, const std::vector<bool>& propagate_down,
                                     const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  const float* y = top[0]->cpu_data();
  const float* dy = top[0]->cpu_diff();
  float* dx = bottom[0]->mutable_cpu_diff();
  const int64_t n = top[0]->count();
  for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * y[i] * (1.f - y[i]);
}

PSTRAIN_REGISTER_LAYER("Sigmoid", SigmoidLayer);

}  // namespace pstrain
