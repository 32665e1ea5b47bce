#include "worker/layers/embed_layer.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "common/math_cpu.hpp"
#include "worker/filler.hpp"
#include "worker/layer_registry.hpp"

namespace pstrain {

Status EmbedLayer::LayerSetUp(const BlobVec& /*bottom*/, const BlobVec& /*top*/) {
  const caffe::EmbedParameter& p = param_.embed_param();
  constexpr uint32_t kMax = std::numeric_limits<int>::max();
  if (p.num_output() == 0 || p.num_output() > kMax) {
    return Status::Error("embed_param.num_output must be given (and > 0)");
  }
  if (p.input_dim() == 0 || p.input_dim() > kMax) {
    return Status::Error("embed_param.input_dim must be given (and > 0)");
  }
  num_output_ = static_cast<int>(p.num_output());
  input_dim_ = static_cast<int>(p.input_dim());
  bias_term_ = p.bias_term();
  const std::vector<int> weight_shape = {input_dim_, num_output_};
  const size_t num_params = bias_term_ ? 2 : 1;
  if (!blobs_.empty()) {
    if (blobs_.size() != num_params) {
      return Status::Error("expected " + std::to_string(num_params) + " param blobs, got " +
                           std::to_string(blobs_.size()));
    }
    if (blobs_[0]->shape() != weight_shape) {
      return Status::Error("weight shape " + blobs_[0]->shape_string() + " does not match " +
                           ShapeString(weight_shape));
    }
    if (bias_term_ && blobs_[1]->shape() != std::vector<int>{num_output_}) {
      return Status::Error("bias shape " + blobs_[1]->shape_string() + " does not match " +
                           ShapeString({num_output_}));
    }
    return Status::Ok();
  }
  Rng rng(MixSeed(context().seed, std::hash<std::string>{}(name())));
  blobs_.push_back(std::make_shared<Blob>(weight_shape));
  PSTRAIN_RETURN_IF_ERROR(ValidateFiller(p.weight_filler(), *blobs_[0], context().max_blob_values)
                              .WithContext("weight_filler"));
  Fill(p.weight_filler(), rng, blobs_[0].get());
  if (bias_term_) {
    blobs_.push_back(std::make_shared<Blob>(std::vector<int>{num_output_}));
    PSTRAIN_RETURN_IF_ERROR(ValidateFiller(p.bias_filler(), *blobs_[1], context().max_blob_values)
                                .WithContext("bias_filler"));
    Fill(p.bias_filler(), rng, blobs_[1].get());
  }
  return Status::Ok();
}

Status EmbedLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  std::vector<int> shape = bottom[0]->shape();
  shape.push_back(num_output_);
  if (bottom[0]->count() * num_output_ > context().max_blob_values) {
    return Status::Error("top " + ShapeString(shape) + " is too large");
  }
  m_ = bottom[0]->count();
  top[0]->Reshape(shape);
  return Status::Ok();
}

bool EmbedLayer::CheckIndices(const Blob& bottom) {
  const float* idx = bottom.cpu_data();
  for (int64_t i = 0; i < m_; ++i) {
    const float v = idx[i];
    if (v >= 0.f && v < static_cast<float>(input_dim_) && v == std::floor(v)) continue;
    if (runtime_status_.ok()) {
      runtime_status_ = Status::Error("index " + std::to_string(v) + " at position " +
                                      std::to_string(i) + " of the bottom is not an integer in " +
                                      "[0, input_dim = " + std::to_string(input_dim_) + ")");
    }
    return false;
  }
  return true;
}

void EmbedLayer::ForwardReference(const BlobVec& bottom, const BlobVec& top) {
  CheckIndices(*bottom[0]);
  const float* idx = bottom[0]->cpu_data();
  const float* w = blobs_[0]->cpu_data();
  float* y = top[0]->mutable_cpu_data();
  for (int64_t i = 0; i < m_; ++i) {
    float* row = y + i * num_output_;
    const float v = idx[i];
    if (v >= 0.f && v < static_cast<float>(input_dim_) && v == std::floor(v)) {
      const float* src = w + static_cast<int64_t>(v) * num_output_;
      std::copy(src, src + num_output_, row);
    } else {
      std::fill(row, row + num_output_, 0.f);
    }
    if (bias_term_) CpuAxpy(num_output_, 1.f, blobs_[1]->cpu_data(), row);
  }
}

void EmbedLayer::BackwardReference(const BlobVec& top, const std::vector<bool>& /*propagate_down*/,
                                   const BlobVec& bottom) {
  const float* dy = top[0]->cpu_diff();
  if (param_propagate_down(0)) {
    const float* idx = bottom[0]->cpu_data();
    float* dw = blobs_[0]->mutable_cpu_diff();
    for (int64_t i = 0; i < m_; ++i) {
      const float v = idx[i];
      if (!(v >= 0.f && v < static_cast<float>(input_dim_) && v == std::floor(v))) continue;
      CpuAxpy(num_output_, 1.f, dy + i * num_output_, dw + static_cast<int64_t>(v) * num_output_);
    }
  }
  if (bias_term_ && param_propagate_down(1)) {
    float* db = blobs_[1]->mutable_cpu_diff();
    for (int64_t i = 0; i < m_; ++i) CpuAxpy(num_output_, 1.f, dy + i * num_output_, db);
  }
}

PSTRAIN_REGISTER_LAYER("Embed", EmbedLayer);

}  // namespace pstrain
