#include "worker/layers/hinge_loss_layer.hpp"

#include <algorithm>
#include <limits>

#include "worker/layer_registry.hpp"

namespace pstrain {

Status HingeLossLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  PSTRAIN_RETURN_IF_ERROR(LossLayer::Reshape(bottom, top));
  num_ = bottom[0]->shape(0);
  if (bottom[1]->count() != num_) {
    return Status::Error("bottom 1 must hold one label per sample (" + std::to_string(num_) +
                         "), got shape " + bottom[1]->shape_string());
  }
  dim_ = num_ > 0 ? static_cast<int>(bottom[0]->count(1)) : 0;
  margins_.ReshapeLike(*bottom[0]);
  return Status::Ok();
}

bool HingeLossLayer::CheckLabels(const Blob& labels) {
  last_error_ = CheckClassLabels(labels, num_, dim_);
  return last_error_.ok();
}

void HingeLossLayer::ForwardReference(const BlobVec& bottom, const BlobVec& top) {
  if (!CheckLabels(*bottom[1])) {
    top[0]->mutable_cpu_data()[0] = std::numeric_limits<float>::quiet_NaN();
    return;
  }
  const float* x = bottom[0]->cpu_data();
  const float* label = bottom[1]->cpu_data();
  float* m = margins_.mutable_cpu_data();
  const bool l2 = param_.hinge_loss_param().norm() == caffe::HingeLossParameter::L2;
  double loss = 0;
  for (int n = 0; n < num_; ++n) {
    const int target = static_cast<int>(label[n]);
    for (int k = 0; k < dim_; ++k) {
      const int64_t i = static_cast<int64_t>(n) * dim_ + k;
      m[i] = std::max(0.f, 1.f + (k == target ? -x[i] : x[i]));
      loss += l2 ? static_cast<double>(m[i]) * m[i] : m[i];
    }
  }
  top[0]->mutable_cpu_data()[0] = num_ > 0 ? static_cast<float>(loss / num_) : 0.f;
}

void HingeLossLayer::BackwardReference(const BlobVec& top, const std::vector<bool>& propagate_down,
                                       const BlobVec& bottom) {
  if (!propagate_down[0] || num_ == 0) return;
  float* dx = bottom[0]->mutable_cpu_diff();
  if (!last_error_.ok()) {
    std::fill(dx, dx + bottom[0]->count(), 0.f);
    return;
  }
  const float scale = top[0]->cpu_diff()[0] / static_cast<float>(num_);
  const bool l2 = param_.hinge_loss_param().norm() == caffe::HingeLossParameter::L2;
  const float* label = bottom[1]->cpu_data();
  const float* m = margins_.cpu_data();
  for (int n = 0; n < num_; ++n) {
    const int target = static_cast<int>(label[n]);
    for (int k = 0; k < dim_; ++k) {
      const int64_t i = static_cast<int64_t>(n) * dim_ + k;
      const float t = k == target ? -1.f : 1.f;  // the sign of x in the margin
      dx[i] = l2 ? 2.f * t * m[i] * scale : (m[i] > 0.f ? t * scale : 0.f);
    }
  }
}

PSTRAIN_REGISTER_LAYER("HingeLoss", HingeLossLayer);

}  // namespace pstrain
