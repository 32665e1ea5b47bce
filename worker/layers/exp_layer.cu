// Exp on the GPU: own kernels, the reference's formulas.
#include "worker/layers/exp_layer.hpp"
#include "worker/layers/layer_kernels.cuh"

namespace pstrain {
namespace {

__global__ void ExpForward(int64_t n, float inner, float outer, const float* x, float* y) {
  PSTRAIN_CUDA_KERNEL_LOOP(i, n) { y[i] = outer * expf(inner * x[i]); }
}

__global__ void ExpBackward(int64_t n, float inner, const float* y, const float* dy, float* dx) {
  PSTRAIN_CUDA_KERNEL_LOOP(i, n) { dx[i] = dy[i] * y[i] * inner; }
}

}  // namespace

void ExpLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  const int64_t n = bottom[0]->count();
  LaunchKernel(n, ExpForward, n, inner_scale_, outer_scale_, bottom[0]->gpu_data(),
               top[0]->mutable_gpu_data());
}

void ExpLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                           const BlobVec& bottom) {
  const int64_t n = bottom[0]->count();
  if (!propagate_down[0]) return;
  LaunchKernel(n, ExpBackward, n, inner_scale_, top[0]->gpu_data(), top[0]->gpu_diff(),
               bottom[0]->mutable_gpu_diff());
}

}  // namespace pstrain
