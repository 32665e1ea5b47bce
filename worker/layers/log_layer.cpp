#include "worker/layers/log_layer.hpp"

#include <cmath>
#include <sstream>

#include "worker/layer_registry.hpp"

namespace pstrain {

Status LogLayer::LayerSetUp(const BlobVec&, const BlobVec&) {
  const caffe::LogParameter& p = param_.log_param();
  if (p.base() != -1.f && !(p.base() > 0.f)) {
    std::ostringstream out;
    out << "log_param.base must be positive or -1 (for e), got " << p.base();
    return Status::Error(out.str());
  }
  base_scale_ = p.base() == -1.f ? 1.f : 1.f / std::log(p.base());
  return Status::Ok();
}

void LogLayer::ForwardReference(const BlobVec& bottom, const BlobVec& top) {
  KeepBottom(bottom, top);
  const float scale = param_.log_param().scale();
  const float shift = param_.log_param().shift();
  const float* x = bottom[0]->cpu_data();
  float* y = top[0]->mutable_cpu_data();
  const int64_t n = bottom[0]->count();
  for (int64_t i = 0; i < n; ++i) y[i] = std::log(shift + scale * x[i]) * base_scale_;
}

void LogLayer::BackwardReference(const BlobVec& top, const std::vector<bool>& propagate_down,
                                 const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  const float scale = param_.log_param().scale();
  const float shift = param_.log_param().shift();
  const float numerator = scale * base_scale_;
  const float* x = BackwardInput(bottom).cpu_data();
  const float* dy = top[0]->cpu_diff();
  float* dx = bottom[0]->mutable_cpu_diff();
  const int64_t n = bottom[0]->count();
  for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * numerator / (shift + scale * x[i]);
}

PSTRAIN_REGISTER_LAYER("Log", LogLayer);

}  // namespace pstrain
