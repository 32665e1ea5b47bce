#include "worker/layers/dropout_layer.hpp"

#include <functional>
#include <sstream>
#include <string>

#include "common/math_cpu.hpp"
#include "worker/layer_registry.hpp"

namespace pstrain {

Status DropoutLayer::LayerSetUp(const BlobVec& /*bottom*/, const BlobVec& /*top*/) {
  ratio_ = param_.dropout_param().dropout_ratio();
  if (!(ratio_ >= 0.f && ratio_ < 1.f)) {
    std::ostringstream message;
    message << "dropout_ratio must be in [0, 1), got " << ratio_;
    return Status::Error(message.str());
  }
  scale_ = 1.f / (1.f - ratio_);
  threshold_ = DropoutThreshold(ratio_);
  return Status::Ok();
}

Status DropoutLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  if (top[0] != bottom[0]) top[0]->ReshapeLike(*bottom[0]);
  mask_.resize(bottom[0]->count());
  return Status::Ok();
}

uint64_t DropoutLayer::Key() const {
  return MixSeed(context().seed, std::hash<std::string>{}(name()));
}

int64_t DropoutLayer::NextFirstSample(const Blob& bottom) {
  if (forward_context().first_sample >= 0) {
    first_sample_ = forward_context().first_sample;
  } else {
    const int64_t batch = bottom.num_axes() > 0 ? bottom.shape(0) : 1;
    const int64_t t = context().start_iter + own_batches_++;
    first_sample_ = (t * context().world_size + context().rank) * batch;
  }
  return first_sample_;
}

void DropoutLayer::ForwardReference(const BlobVec& bottom, const BlobVec& top) {
  const float* x = bottom[0]->cpu_data();
  float* y = top[0]->mutable_cpu_data();
  const int64_t n = bottom[0]->count();
  if (phase() != caffe::TRAIN) {
    if (x != y) CpuCopy(n, x, y);
    return;
  }
  const int64_t first = NextFirstSample(*bottom[0]);
  const int64_t samples = bottom[0]->num_axes() > 0 ? bottom[0]->shape(0) : 1;
  const int64_t inner = samples > 0 ? n / samples : 0;
  const uint64_t key = Key();
  for (int64_t s = 0; s < samples; ++s) {
    const uint64_t sample_key = DropoutSampleKey(key, static_cast<uint64_t>(first + s));
    float* mask = mask_.data() + s * inner;
    for (int64_t j = 0; j < inner; ++j) {
      mask[j] = DropoutBits(sample_key, static_cast<uint64_t>(j)) >= threshold_ ? scale_ : 0.f;
    }
  }
  const float* mask = mask_.data();
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * mask[i];
}

void DropoutLayer::BackwardReference(const BlobVec& top, const std::vector<bool>& propagate_down,
                                     const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  const float* dy = top[0]->cpu_diff();
  float* dx = bottom[0]->mutable_cpu_diff();
  const int64_t n = top[0]->count();
  if (phase() != caffe::TRAIN) {
    if (dx != dy) CpuCopy(n, dy, dx);
    return;
  }
  const float* mask = mask_.data();
  for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * mask[i];
}

PSTRAIN_REGISTER_LAYER("Dropout", DropoutLayer);

}  // namespace pstrain
