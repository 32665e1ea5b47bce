#include "worker/layers/multinomial_logistic_loss_layer.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "worker/layer_registry.hpp"

namespace pstrain {
namespace {
constexpr float kLogThreshold = 1e-20f;  // Caffe's kLOG_THRESHOLD
}  // namespace

Status MultinomialLogisticLossLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  PSTRAIN_RETURN_IF_ERROR(LossLayer::Reshape(bottom, top));
  num_ = bottom[0]->shape(0);
  if (bottom[1]->count() != num_) {
    return Status::Error("bottom 1 must hold one label per sample (" + std::to_string(num_) +
                         "), got shape " + bottom[1]->shape_string());
  }
  dim_ = num_ > 0 ? static_cast<int>(bottom[0]->count(1)) : 0;
  terms_.Reshape({num_});
  return Status::Ok();
}

bool MultinomialLogisticLossLayer::CheckLabels(const Blob& labels) {
  last_error_ = CheckClassLabels(labels, num_, dim_);
  return last_error_.ok();
}

void MultinomialLogisticLossLayer::ForwardReference(const BlobVec& bottom, const BlobVec& top) {
  if (!CheckLabels(*bottom[1])) {
    top[0]->mutable_cpu_data()[0] = std::numeric_limits<float>::quiet_NaN();
    return;
  }
  const float* p = bottom[0]->cpu_data();
  const float* label = bottom[1]->cpu_data();
  double loss = 0;
  for (int n = 0; n < num_; ++n) {
    const int64_t i = static_cast<int64_t>(n) * dim_ + static_cast<int>(label[n]);
    loss -= std::log(std::max(p[i], kLogThreshold));
  }
  top[0]->mutable_cpu_data()[0] = num_ > 0 ? static_cast<float>(loss / num_) : 0.f;
}

void MultinomialLogisticLossLayer::BackwardReference(const BlobVec& top,
                                                     const std::vector<bool>& propagate_down,
                                                     const BlobVec& bottom) {
  if (!propagate_down[0] || num_ == 0) return;
  float* dx = bottom[0]->mutable_cpu_diff();
  std::fill(dx, dx + bottom[0]->count(), 0.f);
  if (!last_error_.ok()) return;
  const float scale = -top[0]->cpu_diff()[0] / static_cast<float>(num_);
  const float* p = bottom[0]->cpu_data();
  const float* label = bottom[1]->cpu_data();
  for (int n = 0; n < num_; ++n) {
    const int64_t i = static_cast<int64_t>(n) * dim_ + static_cast<int>(label[n]);
    dx[i] = scale / std::max(p[i], kLogThreshold);
  }
}

PSTRAIN_REGISTER_LAYER("MultinomialLogisticLoss", MultinomialLogisticLossLayer);

}  // namespace pstrain
