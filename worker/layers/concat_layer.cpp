#include "worker/layers/concat_layer.hpp"

#include <string>

#include "common/math_cpu.hpp"
#include "worker/layer_registry.hpp"

namespace pstrain {

Status ConcatLayer::LayerSetUp(const BlobVec& /*bottom*/, const BlobVec& /*top*/) {
  const caffe::ConcatParameter& p = param_.concat_param();
  if (p.has_axis() && p.has_concat_dim()) {
    return Status::Error("give either axis or concat_dim, not both");
  }
  return Status::Ok();
}

Status ConcatLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  const caffe::ConcatParameter& p = param_.concat_param();
  const int num_axes = bottom[0]->num_axes();
  const int axis = p.has_concat_dim() ? static_cast<int>(p.concat_dim()) : p.axis();
  if (axis < -num_axes || axis >= num_axes || (p.has_concat_dim() && axis < 0)) {
    return Status::Error("axis " + std::to_string(axis) +
                         " is out of range for bottom 0 of shape " + bottom[0]->shape_string());
  }
  axis_ = axis < 0 ? axis + num_axes : axis;
  std::vector<int> top_shape = bottom[0]->shape();
  for (size_t i = 1; i < bottom.size(); ++i) {
    const std::vector<int>& shape = bottom[i]->shape();
    bool fits = static_cast<int>(shape.size()) == num_axes;
    for (int j = 0; fits && j < num_axes; ++j) fits = j == axis_ || shape[j] == top_shape[j];
    if (!fits) {
      return Status::Error("bottom " + std::to_string(i) + " has shape " +
                           bottom[i]->shape_string() + ", bottom 0 has " +
                           bottom[0]->shape_string() + "; Concat along axis " +
                           std::to_string(axis_) + " needs all other axes equal");
    }
    top_shape[axis_] += shape[axis_];
  }
  top[0]->Reshape(top_shape);
  num_concats_ = bottom[0]->count(0, axis_);
  inner_size_ = bottom[0]->count(axis_ + 1);
  if (bottom.size() == 1) {
    top[0]->ShareData(*bottom[0]);
    top[0]->ShareDiff(*bottom[0]);
  }
  return Status::Ok();
}

void ConcatLayer::ForwardReference(const BlobVec& bottom, const BlobVec& top) {
  if (bottom.size() == 1) return;
  float* y = top[0]->mutable_cpu_data();
  const int64_t top_stride = top[0]->shape(axis_) * inner_size_;
  int64_t offset = 0;  // along axis_, times inner_size_
  for (Blob* b : bottom) {
    const float* x = b->cpu_data();
    const int64_t stride = b->shape(axis_) * inner_size_;
    for (int64_t n = 0; n < num_concats_; ++n) {
      CpuCopy(stride, x + n * stride, y + n * top_stride + offset);
    }
    offset += stride;
  }
}

void ConcatLayer::BackwardReference(const BlobVec& top, const std::vector<bool>& propagate_down,
                                    const BlobVec& bottom) {
  if (bottom.size() == 1) return;
  const float* dy = top[0]->cpu_diff();
  const int64_t top_stride = top[0]->shape(axis_) * inner_size_;
  int64_t offset = 0;
  for (size_t i = 0; i < bottom.size(); ++i) {
    const int64_t stride = bottom[i]->shape(axis_) * inner_size_;
    if (propagate_down[i]) {
      float* dx = bottom[i]->mutable_cpu_diff();
      for (int64_t n = 0; n < num_concats_; ++n) {
        CpuCopy(stride, dy + n * top_stride + offset, dx + n * stride);
      }
    }
    offset += stride;
  }
}

PSTRAIN_REGISTER_LAYER("Concat", ConcatLayer);

}  // namespace pstrain
