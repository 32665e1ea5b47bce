// Pooling's "vector" implementation: the layer's geometry handed to the
// vectorised kernels of pooling_cpu_kernels.hpp. MAX keeps its argmax as ints
// (max_index_); with the mask top they are also written there as floats, and
// Backward reads the mask, as the reference path does.
#include <vector>

#include "worker/layers/pooling_cpu_kernels.hpp"
#include "worker/layers/pooling_layer.hpp"

namespace pstrain {
namespace {

PoolShape ShapeOf(int64_t planes, int height, int width, int pooled_h, int pooled_w, int kernel_h,
                  int kernel_w, int stride_h, int stride_w, int pad_h, int pad_w) {
  PoolShape s;
  s.planes = planes;
  s.height = height;
  s.width = width;
  s.pooled_h = pooled_h;
  s.pooled_w = pooled_w;
  s.kernel_h = kernel_h;
  s.kernel_w = kernel_w;
  s.stride_h = stride_h;
  s.stride_w = stride_w;
  s.pad_h = pad_h;
  s.pad_w = pad_w;
  return s;
}

}  // namespace

void PoolingLayer::ForwardVector(const BlobVec& bottom, const BlobVec& top) {
  const PoolShape shape =
      ShapeOf(static_cast<int64_t>(num_) * channels_, height_, width_, pooled_h_, pooled_w_,
              kernel_h_, kernel_w_, stride_h_, stride_w_, pad_h_, pad_w_);
  if (!max_) return AvePoolForward(shape, bottom[0]->cpu_data(), top[0]->mutable_cpu_data());
  MaxPoolForward(shape, bottom[0]->cpu_data(), top[0]->mutable_cpu_data(), max_index_.data());
  if (top.size() > 1) {
    float* mask = top[1]->mutable_cpu_data();
    for (size_t i = 0; i < max_index_.size(); ++i) mask[i] = static_cast<float>(max_index_[i]);
  }
}

void PoolingLayer::BackwardVector(const BlobVec& top, const std::vector<bool>& propagate_down,
                                  const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  const PoolShape shape =
      ShapeOf(static_cast<int64_t>(num_) * channels_, height_, width_, pooled_h_, pooled_w_,
              kernel_h_, kernel_w_, stride_h_, stride_w_, pad_h_, pad_w_);
  float* din = bottom[0]->mutable_cpu_diff();
  if (!max_) return AvePoolBackward(shape, top[0]->cpu_diff(), din);
  if (top.size() > 1) {
    const float* mask = top[1]->cpu_data();
    for (size_t i = 0; i < max_index_.size(); ++i) max_index_[i] = static_cast<int>(mask[i]);
  }
  MaxPoolBackward(shape, top[0]->cpu_diff(), max_index_.data(), din);
}

}  // namespace pstrain
