// BNLL on the GPU: own kernels, the reference's formulas.
#include "worker/layers/bnll_layer.hpp"
#include "worker/layers/layer_kernels.cuh"

namespace pstrain {
namespace {

__global__ void BnllForward(int64_t n, const float* x, float* y) {
  PSTRAIN_CUDA_KERNEL_LOOP(i, n) {
    y[i] = x[i] > 0.f ? x[i] + log1pf(expf(-x[i])) : log1pf(expf(x[i]));
  }
}

__global__ void BnllBackward(int64_t n, const float* x, const float* dy, float* dx) {
  PSTRAIN_CUDA_KERNEL_LOOP(i, n) {
    const float e = expf(fminf(x[i], 50.f));
    dx[i] = dy[i] * e / (e + 1.f);
  }
}

}  // namespace

void BNLLLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  KeepBottom(bottom, top);
  const int64_t n = bottom[0]->count();
  LaunchKernel(n, BnllForward, n, bottom[0]->gpu_data(), top[0]->mutable_gpu_data());
}

void BNLLLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                            const BlobVec& bottom) {
  const int64_t n = bottom[0]->count();
  if (!propagate_down[0]) return;
  LaunchKernel(n, BnllBackward, n, BackwardInput(bottom).gpu_data(), top[0]->gpu_diff(),
               bottom[0]->mutable_gpu_diff());
}

}  // namespace pstrain
