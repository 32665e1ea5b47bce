#include "worker/layers/threshold_layer.hpp"

#include <algorithm>

#include "worker/layer_registry.hpp"

namespace pstrain {

void ThresholdLayer::ForwardReference(const BlobVec& bottom, const BlobVec& top) {
  const float threshold = param_.threshold_param().threshold();
  const float* x = bottom[0]->cpu_data();
  float* y = top[0]->mutable_cpu_data();
  const int64_t n = bottom[0]->count();
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] > threshold ? 1.f : 0.f;
}

void ThresholdLayer::BackwardReference(const BlobVec&, const std::vector<bool>& propagate_down,
                                       const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  float* dx = bottom[0]->mutable_cpu_diff();
  std::fill(dx, dx + bottom[0]->count(), 0.f);
}

PSTRAIN_REGISTER_LAYER("Threshold", ThresholdLayer);

}  // namespace pstrain
