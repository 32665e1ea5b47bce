#include "worker/layers/exp_layer.hpp"

#include <cmath>
#include <sstream>

#include "worker/layer_registry.hpp"

namespace pstrain {

Status ExpLayer::LayerSetUp(const BlobVec&, const BlobVec&) {
  const caffe::ExpParameter& p = param_.exp_param();
  if (p.base() != -1.f && !(p.base() > 0.f)) {
    std::ostringstream out;
    out << "exp_param.base must be positive or -1 (for e), got " << p.base();
    return Status::Error(out.str());
  }
  const float log_base = p.base() == -1.f ? 1.f : std::log(p.base());
  inner_scale_ = log_base * p.scale();
  outer_scale_ = p.shift() == 0.f   ? 1.f
                 : p.base() == -1.f ? std::exp(p.shift())
                                    : std::pow(p.base(), p.shift());
  return Status::Ok();
}

void ExpLayer::ForwardReference(const BlobVec& bottom, const BlobVec& top) {
  const float* x = bottom[0]->cpu_data();
  float* y = top[0]->mutable_cpu_data();
  const int64_t n = bottom[0]->count();
  for (int64_t i = 0; i < n; ++i) y[i] = outer_scale_ * std::exp(inner_scale_ * x[i]);
}

void ExpLayer::BackwardReference(const BlobVec& top, const std::vector<bool>& propagate_down,
                                 const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  const float* y = top[0]->cpu_data();
  const float* dy = top[0]->cpu_diff();
  float* dx = bottom[0]->mutable_cpu_diff();
  const int64_t n = top[0]->count();
  for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * y[i] * inner_scale_;
}

PSTRAIN_REGISTER_LAYER("Exp", ExpLayer);

}  // namespace pstrain
