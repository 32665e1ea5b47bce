#include "worker/layers/layer_kernels.cuh"

namespace pstrain {
namespace {

__global__ void ChannelSumKernel(int64_t outer, int64_t dim, int64_t inner, const float* a,
                                 const float* b, bool accumulate, float* out) {
  __shared__ double partial[kCudaThreads];
  const int64_t d = blockIdx.x;
  const int64_t n = outer * inner;
  double sum = 0;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
    const int64_t index = ((j / inner) * dim + d) * inner + j % inner;
    sum += b == nullptr ? static_cast<double>(a[index])
                        : static_cast<double>(a[index]) * static_cast<double>(b[index]);
  }
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    const float total = static_cast<float>(partial[0]);
    out[d] = accumulate ? out[d] + total : total;
  }
}

__global__ void SoftmaxKernel(int64_t positions, int channels, int64_t inner, const float* x,
                              float* y) {
  PSTRAIN_CUDA_KERNEL_LOOP(pos, positions) {
    const int64_t base = (pos / inner) * channels * inner + pos % inner;
    float max = x[base];
    for (int c = 1; c < channels; ++c) max = fmaxf(max, x[base + c * inner]);
    float sum = 0.f;
    for (int c = 0; c < channels; ++c) {
      const float e = expf(x[base + c * inner] - max);
      y[base + c * inner] = e;
      sum += e;
    }
    for (int c = 0; c < channels; ++c) y[base + c * inner] /= sum;
  }
}

__global__ void SoftmaxBackwardKernel(int64_t positions, int channels, int64_t inner,
                                      const float* y, const float* dy, float* dx) {
  PSTRAIN_CUDA_KERNEL_LOOP(pos, positions) {
    const int64_t base = (pos / inner) * channels * inner + pos % inner;
    float dot = 0.f;
    for (int c = 0; c < channels; ++c) dot += dy[base + c * inner] * y[base + c * inner];
    for (int c = 0; c < channels; ++c) {
      dx[base + c * inner] = (dy[base + c * inner] - dot) * y[base + c * inner];
    }
  }
}

}  // namespace

void GpuSoftmax(int64_t outer, int channels, int64_t inner, const float* x, float* y) {
  if (channels <= 0) return;
  LaunchKernel(outer * inner, SoftmaxKernel, outer * inner, channels, inner, x, y);
}

void GpuSoftmaxBackward(int64_t outer, int channels, int64_t inner, const float* y, const float* dy,
                        float* dx) {
  if (channels <= 0) return;
  LaunchKernel(outer * inner, SoftmaxBackwardKernel, outer * inner, channels, inner, y, dy, dx);
}

void GpuChannelSum(int64_t outer, int64_t dim, int64_t inner, const float* a, const float* b,
                   bool accumulate, float* out) {
  if (dim <= 0) return;
  ChannelSumKernel<<<static_cast<unsigned>(dim), kCudaThreads, 0, LayerStream()>>>(
      outer, dim, inner, a, b, accumulate, out);
  PSTRAIN_CUDA_CHECK(cudaGetLastError());
}

void GpuCopyRows(int64_t rows, int64_t width, const float* src, int64_t src_stride, float* dst,
                 int64_t dst_stride) {
  if (rows <= 0 || width <= 0) return;
  constexpr size_t kFloat = sizeof(float);
  PSTRAIN_CUDA_CHECK(cudaMemcpy2DAsync(dst, dst_stride * kFloat, src, src_stride * kFloat,
                                       width * kFloat, rows, cudaMemcpyDeviceToDevice,
                                       LayerStream()));
}

}  // namespace pstrain
