#include "worker/layers/softmax_layer.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "common/math_cpu.hpp"
#include "worker/layer_registry.hpp"

namespace pstrain {

Status SoftmaxLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  const int axis = param_.softmax_param().axis();
  const int num_axes = bottom[0]->num_axes();
  if (axis < -num_axes || axis >= num_axes) {
    return Status::Error("axis " + std::to_string(axis) +
                         " is out of range for bottom 0 of shape " + bottom[0]->shape_string());
  }
  axis_ = axis < 0 ? axis + num_axes : axis;
  if (top[0] != bottom[0]) top[0]->ReshapeLike(*bottom[0]);
  channels_ = bottom[0]->shape(axis_);
  outer_size_ = bottom[0]->count(0, axis_);
  inner_size_ = bottom[0]->count(axis_ + 1);
  scratch_.resize(inner_size_);
  return Status::Ok();
}

// Each outer slice is a [channels, inner] matrix; the loops run over the
// contiguous inner positions so that they vectorise.
void SoftmaxLayer::ForwardReference(const BlobVec& bottom, const BlobVec& top) {
  const float* x = bottom[0]->cpu_data();
  float* y = top[0]->mutable_cpu_data();
  const int64_t inner = inner_size_;
  const int64_t slice = channels_ * inner;
  float* s = scratch_.data();
  if (channels_ == 0) return;
  for (int64_t o = 0; o < outer_size_; ++o) {
    const float* xo = x + o * slice;
    float* yo = y + o * slice;
    CpuCopy(inner, xo, s);
    for (int c = 1; c < channels_; ++c) {
      const float* xc = xo + c * inner;
      for (int64_t i = 0; i < inner; ++i) s[i] = std::max(s[i], xc[i]);
    }
    // In place, yo aliases xo: each element is read before it is written.
    for (int c = 0; c < channels_; ++c) {
      const float* xc = xo + c * inner;
      float* yc = yo + c * inner;
      for (int64_t i = 0; i < inner; ++i) yc[i] = std::exp(xc[i] - s[i]);
    }
    CpuSet(inner, 0.f, s);
    for (int c = 0; c < channels_; ++c) {
      const float* yc = yo + c * inner;
      for (int64_t i = 0; i < inner; ++i) s[i] += yc[i];
    }
    for (int64_t i = 0; i < inner; ++i) s[i] = 1.f / s[i];
    for (int c = 0; c < channels_; ++c) {
      float* yc = yo + c * inner;
      for (int64_t i = 0; i < inner; ++i) yc[i] *= s[i];
    }
  }
}

void SoftmaxLayer::BackwardReference(const BlobVec& top, const std::vector<bool>& propagate_down,
                                     const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  const float* y = top[0]->cpu_data();
  const float* dy = top[0]->cpu_diff();
  float* dx = bottom[0]->mutable_cpu_diff();
  const int64_t inner = inner_size_;
  const int64_t slice = channels_ * inner;
  float* s = scratch_.data();
  for (int64_t o = 0; o < outer_size_; ++o) {
    const float* yo = y + o * slice;
    const float* dyo = dy + o * slice;
    float* dxo = dx + o * slice;
    CpuSet(inner, 0.f, s);
    for (int c = 0; c < channels_; ++c) {
      const float* yc = yo + c * inner;
      const float* dyc = dyo + c * inner;
      for (int64_t i = 0; i < inner; ++i) s[i] += dyc[i] * yc[i];
    }
    // In place, dxo aliases dyo: each element is read before it is written.
    for (int c = 0; c < channels_; ++c) {
      const float* yc = yo + c * inner;
      const float* dyc = dyo + c * inner;
      float* dxc = dxo + c * inner;
      for (int64_t i = 0; i < inner; ++i) dxc[i] = (dyc[i] - s[i]) * yc[i];
    }
  }
}

PSTRAIN_REGISTER_LAYER("Softmax", SoftmaxLayer);

}  // namespace pstrain
