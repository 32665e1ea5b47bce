#include "worker/layers/contrastive_loss_layer.hpp"

#include <algorithm>
#include <cmath>

#include "worker/layer_registry.hpp"

namespace pstrain {

Status ContrastiveLossLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  PSTRAIN_RETURN_IF_ERROR(LossLayer::Reshape(bottom, top));
  if (bottom[0]->shape() != bottom[1]->shape()) {
    return Status::Error("bottoms 0 and 1 must have the same shape, got " +
                         bottom[0]->shape_string() + " and " + bottom[1]->shape_string());
  }
  num_ = bottom[0]->shape(0);
  if (bottom[2]->count() != num_) {
    return Status::Error("bottom 2 must hold one similarity label per pair (" +
                         std::to_string(num_) + "), got shape " + bottom[2]->shape_string());
  }
  channels_ = bottom[0]->count(1);
  diff_.ReshapeLike(*bottom[0]);
  dist_sq_.Reshape({num_});
  return Status::Ok();
}

float ContrastiveLossLayer::LossFromDistances(const float* labels) const {
  const caffe::ContrastiveLossParameter& p = param_.contrastive_loss_param();
  const double margin = p.margin();
  const float* dist_sq = dist_sq_.cpu_data();
  double loss = 0;
  for (int n = 0; n < num_; ++n) {
    if (static_cast<int>(labels[n]) != 0) {
      loss += dist_sq[n];
    } else if (p.legacy_version()) {
      loss += std::max(margin - dist_sq[n], 0.0);
    } else {
      const double gap = std::max(margin - std::sqrt(static_cast<double>(dist_sq[n])), 0.0);
      loss += gap * gap;
    }
  }
  return num_ > 0 ? static_cast<float>(loss / num_ / 2) : 0.f;
}

void ContrastiveLossLayer::ForwardReference(const BlobVec& bottom, const BlobVec& top) {
  const float* a = bottom[0]->cpu_data();
  const float* b = bottom[1]->cpu_data();
  float* diff = diff_.mutable_cpu_data();
  float* dist_sq = dist_sq_.mutable_cpu_data();
  for (int n = 0; n < num_; ++n) {
    double sum = 0;
    for (int64_t c = 0; c < channels_; ++c) {
      const int64_t i = n * channels_ + c;
      diff[i] = a[i] - b[i];
      sum += static_cast<double>(diff[i]) * diff[i];
    }
    dist_sq[n] = static_cast<float>(sum);
  }
  top[0]->mutable_cpu_data()[0] = LossFromDistances(bottom[2]->cpu_data());
}

void ContrastiveLossLayer::BackwardReference(const BlobVec& top,
                                             const std::vector<bool>& propagate_down,
                                             const BlobVec& bottom) {
  if (num_ == 0) return;
  const caffe::ContrastiveLossParameter& p = param_.contrastive_loss_param();
  const float margin = p.margin();
  const float* labels = bottom[2]->cpu_data();
  const float* diff = diff_.cpu_data();
  const float* dist_sq = dist_sq_.cpu_data();
  for (int i = 0; i < 2; ++i) {
    if (!propagate_down[i]) continue;
    const float alpha = (i == 0 ? 1.f : -1.f) * top[0]->cpu_diff()[0] / static_cast<float>(num_);
    float* out = bottom[i]->mutable_cpu_diff();
    for (int n = 0; n < num_; ++n) {
      float factor = alpha;  // similar pair: alpha * (a - b)
      if (static_cast<int>(labels[n]) == 0) {
        if (p.legacy_version()) {
          factor = margin - dist_sq[n] > 0.f ? -alpha : 0.f;
        } else {
          const float dist = std::sqrt(dist_sq[n]);
          const float gap = margin - dist;
          factor = gap > 0.f ? -alpha * gap / (dist + 1e-4f) : 0.f;
        }
      }
      for (int64_t c = 0; c < channels_; ++c) {
        out[n * channels_ + c] = factor * diff[n * channels_ + c];
      }
    }
  }
}

PSTRAIN_REGISTER_LAYER("ContrastiveLoss", ContrastiveLossLayer);

}  // namespace pstrain
