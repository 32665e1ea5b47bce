#include "worker/layers/absval_layer.hpp"

#include <cmath>

#include "worker/layer_registry.hpp"

namespace pstrain {

Status AbsValLayer::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  if (top[0] == bottom[0]) {
    return Status::Error("AbsVal does not run in place: give the top its own name");
  }
  return Status::Ok();
}

void AbsValLayer::ForwardReference(const BlobVec& bottom, const BlobVec& top) {
  const float* x = bottom[0]->cpu_data();
  float* y = top[0]->mutable_cpu_data();
  const int64_t n = bottom[0]->count();
  for (int64_t i = 0; i < n; ++i) y[i] = std::fabs(x[i]);
}

void AbsValLayer::BackwardReference(const BlobVec& top, const std::vector<bool>& propagate_down,
                                    const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  const float* x = bottom[0]->cpu_data();
  const float* dy = top[0]->cpu_diff();
  float* dx = bottom[0]->mutable_cpu_diff();
  const int64_t n = bottom[0]->count();
  for (int64_t i = 0; i < n; ++i) {
    const float sign = static_cast<float>((x[i] > 0.f) - (x[i] < 0.f));
    dx[i] = dy[i] * sign;
  }
}

PSTRAIN_REGISTER_LAYER("AbsVal", AbsValLayer);

}  // namespace pstrain
