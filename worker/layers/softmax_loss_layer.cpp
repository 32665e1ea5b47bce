#include "worker/layers/softmax_loss_layer.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <limits>

#include "common/math_cpu.hpp"
#include "worker/layer_registry.hpp"

namespace pstrain {

Status SoftmaxWithLossLayer::LayerSetUp(const BlobVec&, const BlobVec&) {
  const caffe::LossParameter& loss = param_.loss_param();
  normalization_ = NormalizationMode(loss);
  has_ignore_label_ = loss.has_ignore_label();
  ignore_label_ = loss.ignore_label();
  return Status::Ok();
}

Status SoftmaxWithLossLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  PSTRAIN_RETURN_IF_ERROR(LossLayer::Reshape(bottom, top));
  const Blob& scores = *bottom[0];
  const int axis = param_.softmax_param().axis();
  if (axis < -scores.num_axes() || axis >= scores.num_axes()) {
    return Status::Error("softmax_param.axis " + std::to_string(axis) + " is out of range for " +
                         "bottom 0 of shape " + scores.shape_string());
  }
  axis_ = scores.CanonicalAxisIndex(axis);
  outer_ = scores.count(0, axis_);
  inner_ = scores.count(axis_ + 1);
  channels_ = scores.shape(axis_);
  if (outer_ * inner_ != bottom[1]->count()) {
    return Status::Error("number of labels must match number of predictions: bottom 0 of shape " +
                         scores.shape_string() + " with softmax axis " + std::to_string(axis_) +
                         " needs " + std::to_string(outer_ * inner_) +
                         " labels, but bottom 1 has shape " + bottom[1]->shape_string());
  }
  prob_.ReshapeLike(scores);
  scratch_.resize(static_cast<size_t>(inner_));
  counted_.assign(static_cast<size_t>(outer_ * inner_), 0);
  if (top.size() >= 2) top[1]->ReshapeLike(scores);
  return Status::Ok();
}

void SoftmaxWithLossLayer::ComputeSoftmax(const Blob& scores) {
  const int64_t dim = channels_ * inner_;
  float* buf = scratch_.data();
  for (int64_t i = 0; i < outer_; ++i) {
    const float* x = scores.cpu_data() + i * dim;
    float* p = prob_.mutable_cpu_data() + i * dim;
    std::copy(x, x + inner_, buf);  // running max over classes
    for (int c = 1; c < channels_; ++c) {
      for (int64_t j = 0; j < inner_; ++j) buf[j] = std::max(buf[j], x[c * inner_ + j]);
    }
    for (int c = 0; c < channels_; ++c) {
      for (int64_t j = 0; j < inner_; ++j) p[c * inner_ + j] = std::exp(x[c * inner_ + j] - buf[j]);
    }
    std::fill(buf, buf + inner_, 0.f);  // now the sum over classes
    for (int c = 0; c < channels_; ++c) {
      for (int64_t j = 0; j < inner_; ++j) buf[j] += p[c * inner_ + j];
    }
    for (int c = 0; c < channels_; ++c) {
      for (int64_t j = 0; j < inner_; ++j) p[c * inner_ + j] /= buf[j];
    }
  }
}

void SoftmaxWithLossLayer::ForwardReference(const BlobVec& bottom, const BlobVec& top) {
  ComputeSoftmax(*bottom[0]);
  const float* prob = prob_.cpu_data();
  const float* label = bottom[1]->cpu_data();
  const int64_t dim = channels_ * inner_;
  last_error_ = Status::Ok();
  double loss = 0;
  int64_t valid = 0;
  for (int64_t i = 0; i < outer_; ++i) {
    for (int64_t j = 0; j < inner_; ++j) {
      const int64_t index = i * inner_ + j;
      counted_[index] = 0;
      int value = 0;
      const bool readable = ReadLabel(label[index], &value);
      if (readable && has_ignore_label_ && value == ignore_label_) continue;
      if (!readable || value < 0 || value >= channels_) {
        if (last_error_.ok()) {
          last_error_ = Status::Error(LabelOutOfRangeMessage(label[index], index, channels_));
        }
        continue;
      }
      counted_[index] = 1;
      loss -= std::log(std::max(prob[i * dim + value * inner_ + j], FLT_MIN));
      ++valid;
    }
  }
  normalizer_ = LossNormalizer(normalization_, outer_, inner_, valid);
  top[0]->mutable_cpu_data()[0] = last_error_.ok() ? static_cast<float>(loss / normalizer_)
                                                   : std::numeric_limits<float>::quiet_NaN();
  if (top.size() == 2) CpuCopy(prob_.count(), prob, top[1]->mutable_cpu_data());
}

void SoftmaxWithLossLayer::BackwardReference(const BlobVec& top,
                                             const std::vector<bool>& propagate_down,
                                             const BlobVec& bottom) {
  if (!propagate_down[0]) return;  // labels (bottom 1) never take a gradient
  const float scale = top[0]->cpu_diff()[0] / normalizer_;
  const float* prob = prob_.cpu_data();
  const float* label = bottom[1]->cpu_data();
  float* diff = bottom[0]->mutable_cpu_diff();
  const int64_t dim = channels_ * inner_;
  for (int64_t i = 0; i < outer_; ++i) {
    for (int64_t j = 0; j < inner_; ++j) {
      const int64_t index = i * inner_ + j;
      float* d = diff + i * dim + j;
      const float* p = prob + i * dim + j;
      if (!counted_[index]) {
        for (int c = 0; c < channels_; ++c) d[c * inner_] = 0.f;
        continue;
      }
      const int value = static_cast<int>(label[index]);
      for (int c = 0; c < channels_; ++c) {
        d[c * inner_] = scale * (p[c * inner_] - (c == value ? 1.f : 0.f));
      }
    }
  }
}

PSTRAIN_REGISTER_LAYER("SoftmaxWithLoss", SoftmaxWithLossLayer);

}  // namespace pstrain
