// BatchNorm on the GPU: own kernels, the reference's arithmetic. Batch
// statistics and the backward sums are GpuChannelReduce passes (two-pass
// mean and variance in double, deterministic, the whole GPU busy); the
// running statistics are updated on the device exactly as UpdateRunningStats
// does. Element-wise kernels index in 32 bits when the blob allows it.
#include "worker/layers/batch_norm_layer.hpp"
#include "worker/layers/layer_kernels.cuh"

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

}  // namespace

void BatchNormLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  if (channels_ == 0) return;
  const int64_t n = bottom[0]->count();
  const float* x = bottom[0]->gpu_data();
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
  if (n == 0) return;
  // y may alias x: element-wise, each read before its write.
  float* y = top[0]->mutable_gpu_data();
  LaunchIndexed(n, Normalise<uint32_t>, Normalise<int64_t>, n, channels_, spatial_, x,
                static_cast<const float*>(mean), std_.gpu_data(), y, x_norm_.mutable_gpu_data());
}

void BatchNormLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                 const BlobVec& bottom) {
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
