// Sigmoid on the GPU: own kernels, the reference's tanh form exactly.
#include "worker/layers/layer_kernels.cuh"
#include "worker/layers/sigmoid_layer.hpp"

namespace pstrain {
namespace {

__global__ void SigmoidForward(int64_t n, const float* x, float* y) {
  PSTRAIN_CUDA_KERNEL_LOOP(i, n) { y[i] = 0.5f * tanhf(0.5f * x[i]) + 0.5f; }
}

__global__ void SigmoidBackward(int64_t n, const float* y, const float* dy, float* dx) {
  PSTRAIN_CUDA_KERNEL_LOOP(i, n) { dx[i] = dy[i] * y[i] * (1.f - y[i]); }
}

}  // namespace

void SigmoidLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  const int64_t n = bottom[0]->count();
  if (n == 0) return;
  LaunchKernel(n, SigmoidForward, n, bottom[0]->gpu_data(), top[0]->mutable_gpu_data());
}

void SigmoidLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                               const BlobVec& bottom) {
  const int64_t n = top[0]->count();
  if (!propagate_down[0] || n == 0) return;
  LaunchKernel(n, SigmoidBackward, n, top[0]->gpu_data(), top[0]->gpu_diff(),
               bottom[0]->mutable_gpu_diff());
}

}  // namespace pstrain
