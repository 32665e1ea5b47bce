#include "worker/layers/accuracy_layer.hpp"

#include <algorithm>
#include <limits>

#include "worker/layer_registry.hpp"
#include "worker/layers/loss_layer.hpp"

namespace pstrain {

Status AccuracyLayer::LayerSetUp(const BlobVec&, const BlobVec&) {
  const caffe::AccuracyParameter& p = param_.accuracy_param();
  if (p.top_k() < 1) return Status::Error("top_k must be at least 1");
  if (p.top_k() > static_cast<uint32_t>(std::numeric_limits<int>::max())) {
    return Status::Error("top_k " + std::to_string(p.top_k()) + " is too large");
  }
  top_k_ = static_cast<int>(p.top_k());
  has_ignore_label_ = p.has_ignore_label();
  ignore_label_ = p.ignore_label();
  return Status::Ok();
}

Status AccuracyLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  const Blob& scores = *bottom[0];
  const int axis = param_.accuracy_param().axis();
  if (axis < -scores.num_axes() || axis >= scores.num_axes()) {
    return Status::Error("accuracy_param.axis " + std::to_string(axis) + " is out of range for " +
                         "bottom 0 of shape " + scores.shape_string());
  }
  axis_ = scores.CanonicalAxisIndex(axis);
  outer_ = scores.count(0, axis_);
  inner_ = scores.count(axis_ + 1);
  channels_ = scores.shape(axis_);
  if (top_k_ > channels_) {
    return Status::Error("top_k " + std::to_string(top_k_) +
                         " must be less than or equal to the number of classes " +
                         std::to_string(channels_));
  }
  if (outer_ * inner_ != bottom[1]->count()) {
    return Status::Error("number of labels must match number of predictions: bottom 0 of shape " +
                         scores.shape_string() + " with class axis " + std::to_string(axis_) +
                         " needs " + std::to_string(outer_ * inner_) +
                         " labels, but bottom 1 has shape " + bottom[1]->shape_string());
  }
  top[0]->Reshape({});
  if (top.size() >= 2) top[1]->Reshape({channels_});
  class_counts_.assign(static_cast<size_t>(channels_), 0);
  return Status::Ok();
}

void AccuracyLayer::ForwardReference(const BlobVec& bottom, const BlobVec& top) {
  const float* scores = bottom[0]->cpu_data();
  const float* label = bottom[1]->cpu_data();
  const int64_t dim = channels_ * inner_;
  float* per_class = top.size() >= 2 ? top[1]->mutable_cpu_data() : nullptr;
  if (per_class != nullptr) std::fill(per_class, per_class + channels_, 0.f);
  std::fill(class_counts_.begin(), class_counts_.end(), 0);
  last_error_ = Status::Ok();
  int64_t correct = 0;
  int64_t counted = 0;
  for (int64_t i = 0; i < outer_; ++i) {
    for (int64_t j = 0; j < inner_; ++j) {
      const int64_t index = i * inner_ + j;
      int value = 0;
      const bool readable = ReadLabel(label[index], &value);
      if (readable && has_ignore_label_ && value == ignore_label_) continue;
      if (!readable || value < 0 || value >= channels_) {
        if (last_error_.ok()) {
          last_error_ = Status::Error(LabelOutOfRangeMessage(label[index], index, channels_));
        }
        continue;
      }
      ++class_counts_[value];
      const float* s = scores + i * dim + j;
      const float truth = s[value * inner_];
      int better = -1;  // the true class itself scores >= truth
      for (int c = 0; c < channels_ && better < top_k_; ++c) {
        if (s[c * inner_] >= truth) ++better;
      }
      if (better < top_k_) {
        ++correct;
        if (per_class != nullptr) per_class[value] += 1.f;
      }
      ++counted;
    }
  }
  float accuracy = counted == 0 ? 0.f : static_cast<float>(correct) / static_cast<float>(counted);
  if (!last_error_.ok()) accuracy = std::numeric_limits<float>::quiet_NaN();
  top[0]->mutable_cpu_data()[0] = accuracy;
  if (per_class != nullptr) {
    for (int c = 0; c < channels_; ++c) {
      per_class[c] =
          class_counts_[c] == 0 ? 0.f : per_class[c] / static_cast<float>(class_counts_[c]);
    }
  }
}

PSTRAIN_REGISTER_LAYER("Accuracy", AccuracyLayer);

}  // namespace pstrain
