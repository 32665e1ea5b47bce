// AbsVal on the GPU: own kernels, the reference's formulas.
#include "worker/layers/absval_layer.hpp"
#include "worker/layers/layer_kernels.cuh"

namespace pstrain {
namespace {

__global__ void AbsForward(int64_t n, const float* x, float* y) {
  PSTRAIN_CUDA_KERNEL_LOOP(i, n) { y[i] = fabsf(x[i]); }
}

__global__ void AbsBackward(int64_t n, const float* x, const float* dy, float* dx) {
  PSTRAIN_CUDA_KERNEL_LOOP(i, n) {
    dx[i] = dy[i] * static_cast<float>((x[i] > 0.f) - (x[i] < 0.f));
  }
}

}  // namespace

void AbsValLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  const int64_t n = bottom[0]->count();
  LaunchKernel(n, AbsForward, n, bottom[0]->gpu_data(), top[0]->mutable_gpu_data());
}

void AbsValLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                              const BlobVec& bottom) {
  const int64_t n = bottom[0]->count();
  if (!propagate_down[0]) return;
  LaunchKernel(n, AbsBackward, n, bottom[0]->gpu_data(), top[0]->gpu_diff(),
               bottom[0]->mutable_gpu_diff());
}

}  // namespace pstrain
