// BatchNorm on the GPU: own kernels, the reference's arithmetic (batch
// statistics two-pass in double, one block per channel; the running
// statistics updated on the device exactly as UpdateRunningStats does).
#include "worker/layers/batch_norm_layer.hpp"
#include "worker/layers/layer_kernels.cuh"

namespace pstrain {
namespace {

// Sums `value(j)` over j < n across the block; every thread gets the total.
template <typename Value>
__device__ double BlockSum(int64_t n, Value value) {
  __shared__ double partial[kCudaThreads];
  double sum = 0;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) sum += value(j);
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  const double total = partial[0];
  __syncthreads();  // partial is reused by the next call
  return total;
}

// Block c: mean and biased variance of channel c over num x spatial.
__global__ void BatchStats(int num, int channels, int64_t spatial, const float* x, float* mean,
                           float* variance) {
  const int c = blockIdx.x;
  const int64_t m = static_cast<int64_t>(num) * spatial;
  // Lambdas inside a kernel are device code.
  auto at = [=](int64_t j) -> double {
    return x[((j / spatial) * channels + c) * spatial + j % spatial];
  };
  const double mu = m > 0 ? BlockSum(m, at) / static_cast<double>(m) : 0.0;
  const double sum_sq = BlockSum(m, [=](int64_t j) {
    const double d = at(j) - mu;
    return d * d;
  });
  if (threadIdx.x == 0) {
    mean[c] = static_cast<float>(mu);
    variance[c] = static_cast<float>(m > 0 ? sum_sq / m : 0.0);
  }
}

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

__global__ void Normalise(int64_t n, int channels, int64_t spatial, const float* x,
                          const float* mean, const float* sd, float* y) {
  PSTRAIN_CUDA_KERNEL_LOOP(i, n) {
    const int64_t c = (i / spatial) % channels;
    y[i] = (x[i] - mean[c]) / sd[c];
  }
}

// dx = (dy - sum_dy / m - sum_dy_y / m * y) / sd; sums null for global stats.
__global__ void NormaliseBackward(int64_t n, int channels, int64_t spatial, double m,
                                  const float* dy, const float* y, const float* sd,
                                  const float* sum_dy, const float* sum_dy_y, float* dx) {
  PSTRAIN_CUDA_KERNEL_LOOP(i, n) {
    const int64_t c = (i / spatial) % channels;
    const float mean_dy = sum_dy == nullptr ? 0.f : static_cast<float>(sum_dy[c] / m);
    const float mean_dy_y = sum_dy_y == nullptr ? 0.f : static_cast<float>(sum_dy_y[c] / m);
    dx[i] = (dy[i] - mean_dy - mean_dy_y * y[i]) / sd[c];
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
    BatchStats<<<channels_, kCudaThreads, 0, LayerStream()>>>(num_, channels_, spatial_, x, mean,
                                                              var);
    PSTRAIN_CUDA_CHECK(cudaGetLastError());
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
  LaunchKernel(n, Normalise, n, channels_, spatial_, x, static_cast<const float*>(mean),
               std_.gpu_data(), y);
  GpuCopy(n, y, x_norm_.mutable_gpu_data());
}

void BatchNormLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                 const BlobVec& bottom) {
  const int64_t n = bottom[0]->count();
  if (!propagate_down[0] || n == 0) return;
  const float* dy = top[0]->gpu_diff();
  const float* y = x_norm_.gpu_data();
  const float* sum_dy = nullptr;
  const float* sum_dy_y = nullptr;
  if (!use_global_stats_) {  // per-channel sums, kept in the statistics blobs' diffs
    GpuChannelSum(num_, channels_, spatial_, dy, nullptr, false, mean_.mutable_gpu_diff());
    GpuChannelSum(num_, channels_, spatial_, dy, y, false, variance_.mutable_gpu_diff());
    sum_dy = mean_.gpu_diff();
    sum_dy_y = variance_.gpu_diff();
  }
  const double m = static_cast<double>(num_) * static_cast<double>(spatial_);
  LaunchKernel(n, NormaliseBackward, n, channels_, spatial_, m, dy, y, std_.gpu_data(), sum_dy,
               sum_dy_y, bottom[0]->mutable_gpu_diff());
}

}  // namespace pstrain
