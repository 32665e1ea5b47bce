// Swish on the GPU: own kernels, the reference's formulas.
#include "worker/layers/layer_kernels.cuh"
#include "worker/layers/swish_layer.hpp"

namespace pstrain {
namespace {

__global__ void SwishForward(int64_t n, float beta, const float* x, float* s, float* y) {
  PSTRAIN_CUDA_KERNEL_LOOP(i, n) {
    s[i] = 0.5f * tanhf(0.5f * beta * x[i]) + 0.5f;
    y[i] = x[i] * s[i];
  }
}

__global__ void SwishBackward(int64_t n, float beta, const float* s, const float* y,
                              const float* dy, float* dx) {
  PSTRAIN_CUDA_KERNEL_LOOP(i, n) { dx[i] = dy[i] * (beta * y[i] + s[i] * (1.f - beta * y[i])); }
}

}  // namespace

void SwishLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  const int64_t n = bottom[0]->count();
  LaunchKernel(n, SwishForward, n, param_.swish_param().beta(), bottom[0]->gpu_data(),
               sigmoid_.mutable_gpu_data(), top[0]->mutable_gpu_data());
}

void SwishLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                             const BlobVec& bottom) {
  const int64_t n = bottom[0]->count();
  if (!propagate_down[0]) return;
  LaunchKernel(n, SwishBackward, n, param_.swish_param().beta(), sigmoid_.gpu_data(),
               top[0]->gpu_data(), top[0]->gpu_diff(), bottom[0]->mutable_gpu_diff());
}

}  // namespace pstrain
