// TanH on the GPU: own kernels.
#include "worker/layers/layer_kernels.cuh"
#include "worker/layers/tanh_layer.hpp"

namespace pstrain {
namespace {

__global__ void TanhForward(int64_t n, const float* x, float* y) {
  PSTRAIN_CUDA_KERNEL_LOOP(i, n) { y[i] = tanhf(x[i]); }
}

__global__ void TanhBackward(int64_t n, const float* y, const float* dy, float* dx) {
  PSTRAIN_CUDA_KERNEL_LOOP(i, n) { dx[i] = dy[i] * (1.f - y[i] * y[i]); }
}

}  // namespace

void TanHLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  const int64_t n = bottom[0]->count();
  if (n == 0) return;
  LaunchKernel(n, TanhForward, n, bottom[0]->gpu_data(), top[0]->mutable_gpu_data());
}

void TanHLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                            const BlobVec& bottom) {
  const int64_t n = top[0]->count();
  if (!propagate_down[0] || n == 0) return;
  LaunchKernel(n, TanhBackward, n, top[0]->gpu_data(), top[0]->gpu_diff(),
               bottom[0]->mutable_gpu_diff());
}

}  // namespace pstrain
