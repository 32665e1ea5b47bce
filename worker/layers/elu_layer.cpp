#include "worker/layers/elu_layer.hpp"

#include <algorithm>
#include <cmath>

#include "worker/layer_registry.hpp"

namespace pstrain {

void ELULayer::ForwardReference(const BlobVec& bottom, const BlobVec& top) {
  KeepBottom(bottom, top);
  const float alpha = param_.elu_param().alpha();
  const float* x = bottom[0]->cpu_data();
  float* y = top[0]->mutable_cpu_data();
  const int64_t n = bottom[0]->count();
  for (int64_t i = 0; i < n; ++i) {
    y[i] = std::max(x[i], 0.f) + alpha * (std::exp(std::min(x[i], 0.f)) - 1.f);
  }
}

void ELULayer::BackwardReference(const BlobVec& top, const std::vector<bool>& propagate_down,
                                 const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  const float alpha = param_.elu_param().alpha();
  const float* x = BackwardInput(bottom).cpu_data();
  const float* y = top[0]->cpu_data();
  const float* dy = top[0]->cpu_diff();
  float* dx = bottom[0]->mutable_cpu_diff();
  const int64_t n = bottom[0]->count();
  for (int64_t i = 0; i < n; ++i) dx[i] = x[i] > 0.f ? dy[i] : dy[i] * (y[i] + alpha);
}

PSTRAIN_REGISTER_LAYER("ELU", ELULayer);

}  // namespace pstrain
