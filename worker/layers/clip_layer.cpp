#include "worker/layers/clip_layer.hpp"

#include <algorithm>
#include <sstream>

#include "worker/layer_registry.hpp"

namespace pstrain {

Status ClipLayer::LayerSetUp(const BlobVec&, const BlobVec&) {
  const caffe::ClipParameter& p = param_.clip_param();
  if (!p.has_min() || !p.has_max()) {
    return Status::Error("Clip needs clip_param { min: ... max: ... }");
  }
  if (!(p.min() <= p.max())) {
    std::ostringstream out;
    out << "clip_param.min (" << p.min() << ") must not exceed clip_param.max (" << p.max() << ")";
    return Status::Error(out.str());
  }
  return Status::Ok();
}

void ClipLayer::ForwardReference(const BlobVec& bottom, const BlobVec& top) {
  KeepBottom(bottom, top);
  const float lo = param_.clip_param().min();
  const float hi = param_.clip_param().max();
  const float* x = bottom[0]->cpu_data();
  float* y = top[0]->mutable_cpu_data();
  const int64_t n = bottom[0]->count();
  for (int64_t i = 0; i < n; ++i) y[i] = std::max(lo, std::min(x[i], hi));
}

void ClipLayer::BackwardReference(const BlobVec& top, const std::vector<bool>& propagate_down,
                                  const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  const float lo = param_.clip_param().min();
  const float hi = param_.clip_param().max();
  const float* x = BackwardInput(bottom).cpu_data();
  const float* dy = top[0]->cpu_diff();
  float* dx = bottom[0]->mutable_cpu_diff();
  const int64_t n = bottom[0]->count();
  for (int64_t i = 0; i < n; ++i) dx[i] = x[i] >= lo && x[i] <= hi ? dy[i] : 0.f;
}

PSTRAIN_REGISTER_LAYER("Clip", ClipLayer);

}  // namespace pstrain
