#include "worker/layers/prelu_layer.hpp"

#include <functional>
#include <string>

#include "worker/filler.hpp"
#include "worker/layer_registry.hpp"

namespace pstrain {

Status PReLULayer::LayerSetUp(const BlobVec& bottom, const BlobVec&) {
  if (bottom[0]->num_axes() < 2) {
    return Status::Error("PReLU needs a bottom of at least 2 axes, got shape " +
                         bottom[0]->shape_string());
  }
  const caffe::PReLUParameter& p = param_.prelu_param();
  shared_ = p.channel_shared();
  if (!blobs_.empty()) return Status::Ok();  // given (loaded)
  auto slopes = std::make_shared<Blob>(std::vector<int>{shared_ ? 1 : bottom[0]->shape(1)});
  caffe::FillerParameter filler = p.filler();
  if (!p.has_filler()) {
    filler.set_type("constant");
    filler.set_value(0.25f);
  }
  PSTRAIN_RETURN_IF_ERROR(ValidateFiller(filler, *slopes, context().max_blob_values));
  Rng rng(MixSeed(context().seed, std::hash<std::string>{}(name())));
  Fill(filler, rng, slopes.get());
  blobs_.push_back(std::move(slopes));
  return Status::Ok();
}

Status PReLULayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  if (bottom[0]->num_axes() < 2) {
    return Status::Error("PReLU needs a bottom of at least 2 axes, got shape " +
                         bottom[0]->shape_string());
  }
  const int channels = bottom[0]->shape(1);
  const int64_t expected = shared_ ? 1 : channels;
  if (blobs_.empty() || blobs_[0]->count() != expected) {
    return Status::Error(
        "the PReLU slopes (" + (blobs_.empty() ? std::string("none") : blobs_[0]->shape_string()) +
        ") do not match " +
        (shared_ ? std::string("channel_shared (1 slope)")
                 : std::to_string(channels) + " channels of bottom " + bottom[0]->shape_string()));
  }
  channels_ = shared_ ? 1 : channels;
  inner_ = bottom[0]->count(2);
  return NeuronLayer::Reshape(bottom, top);
}

void PReLULayer::ForwardReference(const BlobVec& bottom, const BlobVec& top) {
  KeepBottom(bottom, top);
  const float* slope = blobs_[0]->cpu_data();
  const float* x = bottom[0]->cpu_data();
  float* y = top[0]->mutable_cpu_data();
  const int64_t n = bottom[0]->count();
  for (int64_t i = 0; i < n; ++i) {
    const float a = slope[shared_ ? 0 : (i / inner_) % channels_];
    y[i] = x[i] > 0.f ? x[i] : a * x[i];
  }
}

void PReLULayer::BackwardReference(const BlobVec& top, const std::vector<bool>& propagate_down,
                                   const BlobVec& bottom) {
  const float* x = BackwardInput(bottom).cpu_data();
  const float* dy = top[0]->cpu_diff();
  const int64_t n = top[0]->count();
  if (param_propagate_down(0)) {
    float* dslope = blobs_[0]->mutable_cpu_diff();
    for (int64_t i = 0; i < n; ++i) {
      if (x[i] <= 0.f) dslope[shared_ ? 0 : (i / inner_) % channels_] += dy[i] * x[i];
    }
  }
  if (!propagate_down[0]) return;
  const float* slope = blobs_[0]->cpu_data();
  float* dx = bottom[0]->mutable_cpu_diff();
  for (int64_t i = 0; i < n; ++i) {
    const float a = slope[shared_ ? 0 : (i / inner_) % channels_];
    dx[i] = x[i] > 0.f ? dy[i] : a * dy[i];
  }
}

PSTRAIN_REGISTER_LAYER("PReLU", PReLULayer);

}  // namespace pstrain
