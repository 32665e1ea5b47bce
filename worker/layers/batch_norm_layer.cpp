#include "worker/layers/batch_norm_layer.hpp"

#include <cmath>
#include <cstring>

#include "common/math_cpu.hpp"
#include "worker/layer_registry.hpp"
#include "worker/layers/batch_norm_cpu_kernels.hpp"
#include "worker/layers/scale_layer.hpp"

namespace pstrain {

BatchNormLayer::BatchNormLayer(const caffe::LayerParameter& param) : Layer(param) {}
BatchNormLayer::~BatchNormLayer() = default;

Status BatchNormLayer::LayerSetUp(const BlobVec& bottom, const BlobVec&) {
  const caffe::BatchNormParameter& p = layer_param().batch_norm_param();
  use_global_stats_ = p.has_use_global_stats() ? p.use_global_stats() : phase() == caffe::TEST;
  moving_average_fraction_ = p.moving_average_fraction();
  eps_ = p.eps();
  for (int i = 0; i < layer_param().param_size(); ++i) {
    if (layer_param().param(i).lr_mult() != 0.f) {
      return Status::Error(
          "Cannot configure batch normalization statistics as "
          "layer parameters (param " +
          std::to_string(i) + " has lr_mult " + std::to_string(layer_param().param(i).lr_mult()) +
          ")");
    }
  }
  // As Caffe does: the statistics never learn. A spec the prototxt leaves out is
  // pinned to lr_mult 0, so no solver step (weight decay included) touches them
  // and ps-worker keeps them local (Net::AppendParams reads this copy).
  while (param_.param_size() < 3) param_.add_param()->set_lr_mult(0.f);
  if (bottom[0]->num_axes() == 0) return Status::Error("BatchNorm needs a bottom with an axis");
  channels_ = bottom[0]->num_axes() == 1 ? 1 : bottom[0]->shape(1);
  if (blobs_.empty()) {
    blobs_.push_back(std::make_shared<Blob>(std::vector<int>{channels_}));
    blobs_.push_back(std::make_shared<Blob>(std::vector<int>{channels_}));
    blobs_.push_back(std::make_shared<Blob>(std::vector<int>{1}));
    for (auto& blob : blobs_) CpuSet(blob->count(), 0.f, blob->mutable_cpu_data());
  }
  for (int i = 0; i < 3; ++i) set_param_propagate_down(i, false);
  return Status::Ok();
}

Status BatchNormLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  const int channels = bottom[0]->num_axes() <= 1 ? 1 : bottom[0]->shape(1);
  if (bottom[0]->num_axes() == 0 || channels != channels_) {
    return Status::Error("bottom 0 has shape " + bottom[0]->shape_string() +
                         "; BatchNorm was set up for " + std::to_string(channels_) + " channels");
  }
  num_ = bottom[0]->shape(0);
  spatial_ = num_ == 0 || channels_ == 0 ? 0 : bottom[0]->count() / (num_ * channels_);
  if (bottom[0] != top[0]) top[0]->ReshapeLike(*bottom[0]);
  x_norm_.ReshapeLike(*bottom[0]);
  mean_.Reshape({channels_});
  variance_.Reshape({channels_});
  std_.Reshape({channels_});
  return Status::Ok();
}

void BatchNormLayer::LoadGlobalStats() {
  const float s = blobs_[2]->cpu_data()[0];
  const float factor = s == 0.f ? 0.f : 1.f / s;
  CpuScaleCopy(channels_, factor, blobs_[0]->cpu_data(), mean_.mutable_cpu_data());
  CpuScaleCopy(channels_, factor, blobs_[1]->cpu_data(), variance_.mutable_cpu_data());
}

void BatchNormLayer::UpdateRunningStats() {
  const float maf = moving_average_fraction_;
  float* s = blobs_[2]->mutable_cpu_data();
  s[0] = s[0] * maf + 1.f;
  CpuAxpby(channels_, 1.f, mean_.cpu_data(), maf, blobs_[0]->mutable_cpu_data());
  const int64_t m = static_cast<int64_t>(num_) * spatial_;
  const float correction = m > 1 ? static_cast<float>(m) / static_cast<float>(m - 1) : 1.f;
  CpuAxpby(channels_, correction, variance_.cpu_data(), maf, blobs_[1]->mutable_cpu_data());
}

void BatchNormLayer::ComputeStd() {
  const float* var = variance_.cpu_data();
  float* sd = std_.mutable_cpu_data();
  for (int c = 0; c < channels_; ++c) sd[c] = std::sqrt(var[c] + eps_);
}

void BatchNormLayer::ForwardReference(const BlobVec& bottom, const BlobVec& top) {
  const float* x = bottom[0]->cpu_data();
  // y may alias x: each element is read before it is written.
  float* y = top[0]->mutable_cpu_data();
  float* mean = mean_.mutable_cpu_data();
  float* var = variance_.mutable_cpu_data();
  if (use_global_stats_) {
    LoadGlobalStats();
  } else {
    const double m = static_cast<double>(num_) * static_cast<double>(spatial_);
    for (int c = 0; c < channels_; ++c) {
      double sum = 0, sum_sq = 0;
      for (int n = 0; n < num_; ++n) {
        const float* xc = x + (static_cast<int64_t>(n) * channels_ + c) * spatial_;
        for (int64_t i = 0; i < spatial_; ++i) sum += xc[i];
      }
      const double mu = m > 0 ? sum / m : 0.0;
      for (int n = 0; n < num_; ++n) {
        const float* xc = x + (static_cast<int64_t>(n) * channels_ + c) * spatial_;
        for (int64_t i = 0; i < spatial_; ++i) sum_sq += (xc[i] - mu) * (xc[i] - mu);
      }
      mean[c] = static_cast<float>(mu);
      var[c] = static_cast<float>(m > 0 ? sum_sq / m : 0.0);
    }
    UpdateRunningStats();
  }
  ComputeStd();
  const float* sd = std_.cpu_data();
  for (int n = 0; n < num_; ++n) {
    for (int c = 0; c < channels_; ++c) {
      const int64_t offset = (static_cast<int64_t>(n) * channels_ + c) * spatial_;
      for (int64_t i = 0; i < spatial_; ++i) y[offset + i] = (x[offset + i] - mean[c]) / sd[c];
    }
  }
  CpuCopy(top[0]->count(), y, x_norm_.mutable_cpu_data());
}

// Batch statistics: dx = (dy - mean(dy) - mean(dy * y) * y) / std, means over
// N and spatial per channel, y the normalised output. Global: dx = dy / std.
void BatchNormLayer::BackwardReference(const BlobVec& top, const std::vector<bool>& propagate_down,
                                       const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  const float* dy = top[0]->cpu_diff();
  float* dx = bottom[0]->mutable_cpu_diff();  // may alias dy
  const float* y = x_norm_.cpu_data();
  const float* sd = std_.cpu_data();
  const double m = static_cast<double>(num_) * static_cast<double>(spatial_);
  for (int c = 0; c < channels_; ++c) {
    float mean_dy = 0.f, mean_dy_y = 0.f;
    if (!use_global_stats_ && m > 0) {
      double sum = 0, sum_y = 0;
      for (int n = 0; n < num_; ++n) {
        const int64_t offset = (static_cast<int64_t>(n) * channels_ + c) * spatial_;
        for (int64_t i = 0; i < spatial_; ++i) {
          sum += dy[offset + i];
          sum_y += static_cast<double>(dy[offset + i]) * y[offset + i];
        }
      }
      mean_dy = static_cast<float>(sum / m);
      mean_dy_y = static_cast<float>(sum_y / m);
    }
    for (int n = 0; n < num_; ++n) {
      const int64_t offset = (static_cast<int64_t>(n) * channels_ + c) * spatial_;
      for (int64_t i = 0; i < spatial_; ++i) {
        dx[offset + i] = (dy[offset + i] - mean_dy - mean_dy_y * y[offset + i]) / sd[c];
      }
    }
  }
}

bool BatchNormLayer::TakeOver(Layer& next, Blob* bottom, Blob* top) {
  if (fused_scale_ == nullptr) {
    if (!next.Is("Scale") || bottom == nullptr || loss(0) != 0.f) return false;
    auto& scale = static_cast<ScaleLayer&>(next);  // Is("Scale"): the registry's ScaleLayer
    if (!scale.ScalesChannelsOf(*bottom)) return false;
    fused_scale_ = &scale;
    fused_bottom_ = bottom;
    fused_top_ = top;
    set_fused(true);
    scale.FuseInto(this);
    return true;
  }
  // A ReLU in place on the same blob right after the Scale (ResNet's pattern).
  if (fused_relu_ || !next.Is("ReLU")) return false;
  fused_relu_ = true;
  relu_slope_ = next.layer_param().relu_param().negative_slope();
  return true;
}

void BatchNormLayer::ForwardFused(const BlobVec& bottom, const BlobVec& top) {
  if (use_global_stats_) LoadGlobalStats();
  const Blob* bias = fused_scale_->bias();
  const BnShape shape{num_, channels_, spatial_};
  const float* x = bottom[0]->cpu_data();
  const BnRelu relu{fused_relu_, relu_slope_};
  BnScaleForward(shape, !use_global_stats_, eps_, relu, x, fused_scale_->blobs()[0]->cpu_data(),
                 bias != nullptr ? bias->cpu_data() : nullptr, mean_.mutable_cpu_data(),
                 variance_.mutable_cpu_data(), std_.mutable_cpu_data(), x_norm_.mutable_cpu_data(),
                 top[0]->mutable_cpu_data());
  if (!use_global_stats_) UpdateRunningStats();
}

void BatchNormLayer::BackwardFusedSlot(const std::vector<bool>& propagate_down) {
  // Only when asked for a bottom diff the Scale's Backward did not write
  // (a caller driving the layers by hand; never in Net::Backward).
  if (propagate_down[0] && !fused_bottom_diff_done_) BackwardFused(false, false, true);
  fused_bottom_diff_done_ = false;
}

void BatchNormLayer::BackwardFused(bool scale_diff, bool bias_diff, bool bottom_diff) {
  fused_bottom_diff_done_ = bottom_diff;
#ifdef PSTRAIN_HAVE_CUDA
  if (engine() == Engine::kGpu) return BackwardFusedGpu(scale_diff, bias_diff, bottom_diff);
#endif
  Blob* scale = fused_scale_->blobs()[0].get();
  Blob* bias = fused_scale_->bias();
  float* scale_out = scale_diff ? scale->mutable_cpu_diff() : nullptr;
  float* bias_out = bias_diff && bias != nullptr ? bias->mutable_cpu_diff() : nullptr;
  const float* dy = fused_top_->cpu_diff();
  float* dx = bottom_diff ? fused_bottom_->mutable_cpu_diff() : nullptr;  // may alias dy
  if (scale_out == nullptr && bias_out == nullptr && dx == nullptr) return;
  const BnShape shape{num_, channels_, spatial_};
  const BnRelu relu{fused_relu_, relu_slope_};
  const float* y = fused_relu_ ? fused_top_->cpu_data() : nullptr;  // the ReLU's output
  BnScaleBackward(shape, !use_global_stats_, relu, y, dy, x_norm_.cpu_data(), scale->cpu_data(),
                  std_.cpu_data(), scale_out, bias_out, dx);
}

PSTRAIN_REGISTER_LAYER("BatchNorm", BatchNormLayer);

}  // namespace pstrain
