// BatchNorm on the GPU: own kernels, the reference's arithmetic; fused with
// the Scale after it (batch_norm_layer.hpp), the same formulas as the CPU's
// batch_norm_cpu_kernels.hpp. Batch
// statistics and the backward sums are GpuChannelReduce passes (two-pass
// mean and variance in double, deterministic, the whole GPU busy); the
// running statistics are updated on the device exactly as UpdateRunningStats
// does. Element-wise kernels index in 32 bits when the blob allows it.
#include "common/cuda/device_allocator.hpp"
#include "worker/layers/batch_norm_layer.hpp"
#include "worker/layers/layer_kernels.cuh"
#include "worker/layers/scale_layer.hpp"

namespace pstrain {
namespace {

// mean/variance = stored sums / s (0 when s = 0); s = running[0] on the device.
__global__ void GlobalStats(int channels, const float* mean_sum, const float* var_sum,
                            const float* s, float* mean, float* variance) {
  const float factor = s[0] == 0.f ? 0.f : 1.f / s[0];
  PSTRAIN_CUDA_KERNEL_LOOP(c, channels) {
    mean[c] = factor * mean_sum[c];
    variance[c] = factor * var_sum[c];
  }
}

__global__ void UpdateNormaliser(float maf, float* s) { s[0] = s[0] * maf + 1.f; }

__global__ void StdKernel(int channels, float eps, const float* variance, float* sd) {
  PSTRAIN_CUDA_KERNEL_LOOP(c, channels) { sd[c] = sqrtf(variance[c] + eps); }
}

// y = x_norm = (x - mean[c]) / sd[c]; y may alias x.
template <typename Index>
__global__ void Normalise(Index n, Index channels, Index spatial, const float* x, const float* mean,
                          const float* sd, float* y, float* x_norm) {
  PSTRAIN_CUDA_INDEX_LOOP(Index, i, n) {
    const Index c = (i / spatial) % channels;
    const float value = (x[i] - mean[c]) / sd[c];
    y[i] = value;
    x_norm[i] = value;
  }
}

// dx = (dy - mean_dy - mean_dy_y * y) / sd; means null for global stats.
template <typename Index>
__global__ void NormaliseBackward(Index n, Index channels, Index spatial, const float* dy,
                                  const float* y, const float* sd, const float* mean_dy,
                                  const float* mean_dy_y, float* dx) {
  PSTRAIN_CUDA_INDEX_LOOP(Index, i, n) {
    const Index c = (i / spatial) % channels;
    const float a = mean_dy == nullptr ? 0.f : mean_dy[c];
    const float b = mean_dy_y == nullptr ? 0.f : mean_dy_y[c];
    dx[i] = (dy[i] - a - b * y[i]) / sd[c];
  }
}

// Fused forward: x_norm = (x - mean[c]) / sd[c], y = x_norm * scale[c] + bias[c]
// (bias may be null), then with `relu` y > 0 ? y : slope * y; y may alias x.
template <typename Index>
__global__ void NormaliseScale(Index n, Index channels, Index spatial, const float* x,
                               const float* mean, const float* sd, const float* scale,
                               const float* bias, bool relu, float slope, float* x_norm, float* y) {
  PSTRAIN_CUDA_INDEX_LOOP(Index, i, n) {
    const Index c = (i / spatial) % channels;
    const float value = (x[i] - mean[c]) / sd[c];
    x_norm[i] = value;
    const float z = bias == nullptr ? value * scale[c] : value * scale[c] + bias[c];
    y[i] = !relu || z > 0.f ? z : slope * z;
  }
}

// Per channel from the totals S = sum dy and P = sum dy * x_norm: the Scale's
// gradients (each when not null) and the coefficients of the bottom diff,
// k = scale / sd, a = S / m, b = P / m (a, b 0 for global statistics).
__global__ void FusedCoefficients(int channels, double m, bool batch_stats, const double* totals,
                                  const double* products, const float* scale, const float* sd,
                                  float* scale_diff, float* bias_diff, float* k, float* a,
                                  float* b) {
  PSTRAIN_CUDA_KERNEL_LOOP(c, channels) {
    const double total = totals == nullptr ? 0.0 : totals[c];
    const double product = products == nullptr ? 0.0 : products[c];
    if (scale_diff != nullptr) scale_diff[c] += static_cast<float>(product);
    if (bias_diff != nullptr) bias_diff[c] += static_cast<float>(total);
    k[c] = scale[c] / sd[c];
    a[c] = batch_stats && m > 0 ? static_cast<float>(total / m) : 0.f;
    b[c] = batch_stats && m > 0 ? static_cast<float>(product / m) : 0.f;
  }
}

// dx = k[c] * (dy - a[c] - b[c] * x_norm); dx may alias dy.
template <typename Index>
__global__ void FusedBottomDiff(Index n, Index channels, Index spatial, const float* dy,
                                const float* x_norm, const float* k, const float* a, const float* b,
                                float* dx) {
  PSTRAIN_CUDA_INDEX_LOOP(Index, i, n) {
    const Index c = (i / spatial) % channels;
    dx[i] = k[c] * (dy[i] - a[c] - b[c] * x_norm[i]);
  }
}

}  // namespace

void BatchNormLayer::GpuStatistics(const float* x) {
  float* mean = mean_.mutable_gpu_data();
  float* var = variance_.mutable_gpu_data();
  if (use_global_stats_) {
    LaunchKernel(channels_, GlobalStats, channels_, blobs_[0]->gpu_data(), blobs_[1]->gpu_data(),
                 blobs_[2]->gpu_data(), mean, var);
  } else {
    GpuChannelMeanVariance(num_, channels_, spatial_, x, mean, var);
    const float maf = moving_average_fraction_;
    UpdateNormaliser<<<1, 1, 0, LayerStream()>>>(maf, blobs_[2]->mutable_gpu_data());
    PSTRAIN_CUDA_CHECK(cudaGetLastError());
    GpuAxpby(channels_, 1.f, mean, maf, blobs_[0]->mutable_gpu_data());
    const int64_t m = static_cast<int64_t>(num_) * spatial_;
    const float correction = m > 1 ? static_cast<float>(m) / static_cast<float>(m - 1) : 1.f;
    GpuAxpby(channels_, correction, var, maf, blobs_[1]->mutable_gpu_data());
  }
  LaunchKernel(channels_, StdKernel, channels_, eps_, static_cast<const float*>(var),
               std_.mutable_gpu_data());
}

void BatchNormLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  relu_gated_ = false;
  if (channels_ == 0) return;
  const int64_t n = bottom[0]->count();
  const float* x = bottom[0]->gpu_data();
  GpuStatistics(x);
  if (n == 0) return;
  // y may alias x: element-wise, each read before its write.
  float* y = top[0]->mutable_gpu_data();
  if (fused_scale_ == nullptr) {
    LaunchIndexed(n, Normalise<uint32_t>, Normalise<int64_t>, n, channels_, spatial_, x,
                  mean_.gpu_data(), std_.gpu_data(), y, x_norm_.mutable_gpu_data());
    return;
  }
  const Blob* bias = fused_scale_->bias();
  LaunchIndexed(n, NormaliseScale<uint32_t>, NormaliseScale<int64_t>, n, channels_, spatial_, x,
                mean_.gpu_data(), std_.gpu_data(), fused_scale_->blobs()[0]->gpu_data(),
                bias != nullptr ? bias->gpu_data() : nullptr, fused_relu_, relu_slope_,
                x_norm_.mutable_gpu_data(), y);
}

void BatchNormLayer::BackwardFusedGpu(bool scale_diff, bool bias_diff, bool bottom_diff) {
  Blob* scale = fused_scale_->blobs()[0].get();
  Blob* bias = fused_scale_->bias();
  float* scale_out = scale_diff ? scale->mutable_gpu_diff() : nullptr;
  float* bias_out = bias_diff && bias != nullptr ? bias->mutable_gpu_diff() : nullptr;
  const bool batch_stats = !use_global_stats_;
  if (channels_ == 0 || (scale_out == nullptr && bias_out == nullptr && !bottom_diff)) return;
  const int64_t n = fused_top_->count();
  if (fused_relu_ && n > 0 && !relu_gated_) {  // the ReLU's backward, in place as Caffe's
    GpuReluBackward(n, relu_slope_, fused_top_->gpu_data(), fused_top_->gpu_diff(),
                    fused_top_->mutable_gpu_diff());
    relu_gated_ = true;  // once per forward, however often this runs
  }
  const float* dy = fused_top_->gpu_diff();
  const float* x_norm = x_norm_.gpu_data();
  double* totals = nullptr;
  const bool sums = scale_out != nullptr || bias_out != nullptr || (bottom_diff && batch_stats);
  if (sums) {
    totals = static_cast<double*>(DeviceAlloc(sizeof(double) * 2 * channels_));
    ChannelSumOutput out;
    out.divisor = 0.0;  // the totals themselves
    out.exact = totals;
    GpuChannelReduce(num_, channels_, spatial_, ChannelTerm::kValue, dy, nullptr, nullptr, out);
    out.exact = totals + channels_;
    GpuChannelReduce(num_, channels_, spatial_, ChannelTerm::kProduct, dy, x_norm, nullptr, out);
  }
  // k, a, b per channel, kept in the statistics blobs' diffs.
  float* k = std_.mutable_gpu_diff();
  float* a = mean_.mutable_gpu_diff();
  float* b = variance_.mutable_gpu_diff();
  const double m = static_cast<double>(num_) * static_cast<double>(spatial_);
  LaunchKernel(channels_, FusedCoefficients, channels_, m, batch_stats,
               static_cast<const double*>(totals),
               static_cast<const double*>(totals == nullptr ? nullptr : totals + channels_),
               scale->gpu_data(), std_.gpu_data(), scale_out, bias_out, k, a, b);
  if (totals != nullptr) DeviceFree(totals);  // stream-ordered (DeviceFree's contract)
  if (!bottom_diff || n == 0) return;
  float* dx = fused_bottom_->mutable_gpu_diff();  // may alias dy
  LaunchIndexed(n, FusedBottomDiff<uint32_t>, FusedBottomDiff<int64_t>, n, channels_, spatial_, dy,
                x_norm, static_cast<const float*>(k), static_cast<const float*>(a),
                static_cast<const float*>(b), dx);
}

void BatchNormLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                 const BlobVec& bottom) {
  if (fused_scale_ != nullptr) return BackwardFusedSlot(propagate_down);
  const int64_t n = bottom[0]->count();
  if (!propagate_down[0] || n == 0) return;
  const float* dy = top[0]->gpu_diff();
  const float* y = x_norm_.gpu_data();
  const float* mean_dy = nullptr;
  const float* mean_dy_y = nullptr;
  if (!use_global_stats_) {  // per-channel means, kept in the statistics blobs' diffs
    const int64_t m = static_cast<int64_t>(num_) * spatial_;
    ChannelSumOutput out;
    out.divisor = m > 0 ? static_cast<double>(m) : 1.0;
    out.values = mean_.mutable_gpu_diff();
    GpuChannelReduce(num_, channels_, spatial_, ChannelTerm::kValue, dy, nullptr, nullptr, out);
    out.values = variance_.mutable_gpu_diff();
    GpuChannelReduce(num_, channels_, spatial_, ChannelTerm::kProduct, dy, y, nullptr, out);
    mean_dy = mean_.gpu_diff();
    mean_dy_y = variance_.gpu_diff();
  }
  LaunchIndexed(n, NormaliseBackward<uint32_t>, NormaliseBackward<int64_t>, n, channels_, spatial_,
                dy, y, std_.gpu_data(), mean_dy, mean_dy_y, bottom[0]->mutable_gpu_diff());
}

}  // namespace pstrain
