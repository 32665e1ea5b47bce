#include "worker/layers/slice_layer.hpp"

#include <string>

#include "common/math_cpu.hpp"
#include "worker/layer_registry.hpp"

namespace pstrain {

Status SliceLayer::LayerSetUp(const BlobVec& /*bottom*/, const BlobVec& /*top*/) {
  const caffe::SliceParameter& p = param_.slice_param();
  if (p.has_axis() && p.has_slice_dim()) {
    return Status::Error("give either axis or slice_dim, not both");
  }
  return Status::Ok();
}

Status SliceLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  const caffe::SliceParameter& p = param_.slice_param();
  const int num_axes = bottom[0]->num_axes();
  const int axis = p.has_slice_dim() ? static_cast<int>(p.slice_dim()) : p.axis();
  if (axis < -num_axes || axis >= num_axes || (p.has_slice_dim() && axis < 0)) {
    return Status::Error("axis " + std::to_string(axis) +
                         " is out of range for bottom 0 of shape " + bottom[0]->shape_string());
  }
  axis_ = axis < 0 ? axis + num_axes : axis;
  const int dim = bottom[0]->shape(axis_);
  const int num_tops = static_cast<int>(top.size());
  std::vector<int> sizes;
  if (p.slice_point_size() > 0) {
    if (p.slice_point_size() != num_tops - 1) {
      return Status::Error(std::to_string(p.slice_point_size()) + " slice points for " +
                           std::to_string(num_tops) + " tops; need one fewer than the tops");
    }
    int64_t prev = 0;
    for (int i = 0; i <= p.slice_point_size(); ++i) {
      const int64_t point = i < p.slice_point_size() ? p.slice_point(i) : dim;
      if (point <= prev) {
        return Status::Error("slice points must increase strictly within (0, " +
                             std::to_string(dim) + ") along axis " + std::to_string(axis_) +
                             " of bottom " + bottom[0]->shape_string());
      }
      sizes.push_back(static_cast<int>(point - prev));
      prev = point;
    }
  } else {
    if (dim % num_tops != 0) {
      return Status::Error(std::to_string(num_tops) + " tops do not divide axis " +
                           std::to_string(axis_) + " of size " + std::to_string(dim) +
                           " evenly; give slice_point");
    }
    sizes.assign(num_tops, dim / num_tops);
  }
  std::vector<int> shape = bottom[0]->shape();
  for (int i = 0; i < num_tops; ++i) {
    shape[axis_] = sizes[i];
    top[i]->Reshape(shape);
  }
  num_slices_ = bottom[0]->count(0, axis_);
  inner_size_ = bottom[0]->count(axis_ + 1);
  if (num_tops == 1) {
    top[0]->ShareData(*bottom[0]);
    top[0]->ShareDiff(*bottom[0]);
  }
  return Status::Ok();
}

void SliceLayer::ForwardReference(const BlobVec& bottom, const BlobVec& top) {
  if (top.size() == 1) return;
  const float* x = bottom[0]->cpu_data();
  const int64_t bottom_stride = bottom[0]->shape(axis_) * inner_size_;
  int64_t offset = 0;  // along axis_, times inner_size_
  for (Blob* t : top) {
    float* y = t->mutable_cpu_data();
    const int64_t stride = t->shape(axis_) * inner_size_;
    for (int64_t n = 0; n < num_slices_; ++n) {
      CpuCopy(stride, x + n * bottom_stride + offset, y + n * stride);
    }
    offset += stride;
  }
}

void SliceLayer::BackwardReference(const BlobVec& top, const std::vector<bool>& propagate_down,
                                   const BlobVec& bottom) {
  if (!propagate_down[0] || top.size() == 1) return;
  float* dx = bottom[0]->mutable_cpu_diff();
  const int64_t bottom_stride = bottom[0]->shape(axis_) * inner_size_;
  int64_t offset = 0;
  for (Blob* t : top) {
    const float* dy = t->cpu_diff();
    const int64_t stride = t->shape(axis_) * inner_size_;
    for (int64_t n = 0; n < num_slices_; ++n) {
      CpuCopy(stride, dy + n * stride, dx + n * bottom_stride + offset);
    }
    offset += stride;
  }
}

PSTRAIN_REGISTER_LAYER("Slice", SliceLayer);

}  // namespace pstrain
