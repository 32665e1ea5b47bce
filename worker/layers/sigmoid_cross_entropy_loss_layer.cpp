#include "worker/layers/sigmoid_cross_entropy_loss_layer.hpp"

#include <cmath>

#include "worker/layer_registry.hpp"

namespace pstrain {

Status SigmoidCrossEntropyLossLayer::LayerSetUp(const BlobVec&, const BlobVec&) {
  const caffe::LossParameter& loss = param_.loss_param();
  // Caffe's SigmoidCrossEntropyLoss divides by the batch size unless the
  // file says otherwise (normalization, or the legacy normalize); the proto's
  // default VALID is SoftmaxWithLoss's, not this layer's.
  normalization_ = loss.has_normalization() || loss.has_normalize()
                       ? NormalizationMode(loss)
                       : caffe::LossParameter::BATCH_SIZE;
  has_ignore_label_ = loss.has_ignore_label();
  ignore_label_ = loss.ignore_label();
  return Status::Ok();
}

Status SigmoidCrossEntropyLossLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  PSTRAIN_RETURN_IF_ERROR(LossLayer::Reshape(bottom, top));
  if (bottom[0]->count() != bottom[1]->count()) {
    return Status::Error(
        "SigmoidCrossEntropyLoss inputs must have the same count: bottom 0 of "
        "shape " +
        bottom[0]->shape_string() + ", bottom 1 of shape " + bottom[1]->shape_string());
  }
  return Status::Ok();
}

bool SigmoidCrossEntropyLossLayer::Ignored(float target) const {
  int value = 0;
  return has_ignore_label_ && ReadLabel(target, &value) && value == ignore_label_;
}

void SigmoidCrossEntropyLossLayer::ForwardReference(const BlobVec& bottom, const BlobVec& top) {
  const int64_t n = bottom[0]->count();
  const float* x = bottom[0]->cpu_data();
  const float* t = bottom[1]->cpu_data();
  double loss = 0;
  int64_t valid = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (Ignored(t[i])) continue;
    const float positive = x[i] >= 0 ? 1.f : 0.f;
    loss -= x[i] * (t[i] - positive) - std::log1p(std::exp(x[i] - 2 * x[i] * positive));
    ++valid;
  }
  normalizer_ = LossNormalizer(normalization_, bottom[0]->shape(0), bottom[0]->count(1), valid);
  top[0]->mutable_cpu_data()[0] = static_cast<float>(loss / normalizer_);
}

void SigmoidCrossEntropyLossLayer::BackwardReference(const BlobVec& top,
                                                     const std::vector<bool>& propagate_down,
                                                     const BlobVec& bottom) {
  if (!propagate_down[0]) return;  // targets (bottom 1) never take a gradient
  const float scale = top[0]->cpu_diff()[0] / normalizer_;
  const int64_t n = bottom[0]->count();
  const float* x = bottom[0]->cpu_data();
  const float* t = bottom[1]->cpu_data();
  float* diff = bottom[0]->mutable_cpu_diff();
  for (int64_t i = 0; i < n; ++i) {
    const float sigmoid = 1.f / (1.f + std::exp(-x[i]));
    diff[i] = Ignored(t[i]) ? 0.f : scale * (sigmoid - t[i]);
  }
}

PSTRAIN_REGISTER_LAYER("SigmoidCrossEntropyLoss", SigmoidCrossEntropyLossLayer);

}  // namespace pstrain
