#include "worker/layers/power_layer.hpp"

#include <cmath>

#include "worker/layer_registry.hpp"

namespace pstrain {

void PowerLayer::ForwardReference(const BlobVec& bottom, const BlobVec& top) {
  KeepBottom(bottom, top);
  const caffe::PowerParameter& p = param_.power_param();
  const float* x = bottom[0]->cpu_data();
  float* y = top[0]->mutable_cpu_data();
  const int64_t n = bottom[0]->count();
  if (p.power() * p.scale() == 0.f) {
    const float value = p.power() == 0.f ? 1.f : std::pow(p.shift(), p.power());
    for (int64_t i = 0; i < n; ++i) y[i] = value;
    return;
  }
  for (int64_t i = 0; i < n; ++i) y[i] = std::pow(p.shift() + p.scale() * x[i], p.power());
}

void PowerLayer::BackwardReference(const BlobVec& top, const std::vector<bool>& propagate_down,
                                   const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  const caffe::PowerParameter& p = param_.power_param();
  const float diff_scale = p.power() * p.scale();
  const float* x = BackwardInput(bottom).cpu_data();
  const float* dy = top[0]->cpu_diff();
  float* dx = bottom[0]->mutable_cpu_diff();
  const int64_t n = bottom[0]->count();
  for (int64_t i = 0; i < n; ++i) {
    dx[i] = diff_scale == 0.f
                ? 0.f
                : dy[i] * diff_scale * std::pow(p.shift() + p.scale() * x[i], p.power() - 1.f);
  }
}

PSTRAIN_REGISTER_LAYER("Power", PowerLayer);

}  // namespace pstrain
