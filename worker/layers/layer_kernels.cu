#include <atomic>

#include "worker/layers/cudnn_descriptors.hpp"
#include "worker/layers/layer_kernels.cuh"

namespace pstrain {
namespace {

std::atomic<int64_t> cudnn_descriptors_created{0};

template <typename Index>
__global__ void SoftmaxKernel(Index positions, Index channels, Index inner, const float* x,
                              float* y) {
  PSTRAIN_CUDA_INDEX_LOOP(Index, pos, positions) {
    const Index base = (pos / inner) * channels * inner + pos % inner;
    float max = x[base];
    for (Index c = 1; c < channels; ++c) max = fmaxf(max, x[base + c * inner]);
    float sum = 0.f;
    for (Index c = 0; c < channels; ++c) {
      const float e = expf(x[base + c * inner] - max);
      y[base + c * inner] = e;
      sum += e;
    }
    for (Index c = 0; c < channels; ++c) y[base + c * inner] /= sum;
  }
}

template <typename Index>
__global__ void SoftmaxBackwardKernel(Index positions, Index channels, Index inner, const float* y,
                                      const float* dy, float* dx) {
  PSTRAIN_CUDA_INDEX_LOOP(Index, pos, positions) {
    const Index base = (pos / inner) * channels * inner + pos % inner;
    float dot = 0.f;
    for (Index c = 0; c < channels; ++c) dot += dy[base + c * inner] * y[base + c * inner];
    for (Index c = 0; c < channels; ++c) {
      dx[base + c * inner] = (dy[base + c * inner] - dot) * y[base + c * inner];
    }
  }
}

}  // namespace

void GpuSoftmax(int64_t outer, int channels, int64_t inner, const float* x, float* y) {
  if (channels <= 0) return;
  // Indices reach outer * channels * inner: 32-bit when the whole array fits.
  const int64_t positions = outer * inner;
  if (Fits32BitIndex(positions * channels)) {
    LaunchKernel(positions, SoftmaxKernel<uint32_t>, positions, channels, inner, x, y);
  } else {
    LaunchKernel(positions, SoftmaxKernel<int64_t>, positions, channels, inner, x, y);
  }
}

void GpuSoftmaxBackward(int64_t outer, int channels, int64_t inner, const float* y, const float* dy,
                        float* dx) {
  if (channels <= 0) return;
  const int64_t positions = outer * inner;
  if (Fits32BitIndex(positions * channels)) {
    LaunchKernel(positions, SoftmaxBackwardKernel<uint32_t>, positions, channels, inner, y, dy, dx);
  } else {
    LaunchKernel(positions, SoftmaxBackwardKernel<int64_t>, positions, channels, inner, y, dy, dx);
  }
}

void GpuCopyRows(int64_t rows, int64_t width, const float* src, int64_t src_stride, float* dst,
                 int64_t dst_stride) {
  if (rows <= 0 || width <= 0) return;
  constexpr size_t kFloat = sizeof(float);
  PSTRAIN_CUDA_CHECK(cudaMemcpy2DAsync(dst, dst_stride * kFloat, src, src_stride * kFloat,
                                       width * kFloat, rows, cudaMemcpyDeviceToDevice,
                                       LayerStream()));
}

int64_t CudnnDescriptorsCreated() { return cudnn_descriptors_created.load(); }
void CountCudnnDescriptorCreated() { cudnn_descriptors_created.fetch_add(1); }

}  // namespace pstrain
