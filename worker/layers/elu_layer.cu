// ELU on the GPU: own kernels, the reference's formulas.
#include "worker/layers/elu_layer.hpp"
#include "worker/layers/layer_kernels.cuh"

namespace pstrain {
namespace {

__global__ void EluForward(int64_t n, float alpha, const float* x, float* y) {
  PSTRAIN_CUDA_KERNEL_LOOP(i, n) {
    y[i] = fmaxf(x[i], 0.f) + alpha * (expf(fminf(x[i], 0.f)) - 1.f);
  }
}

__global__ void EluBackward(int64_t n, float alpha, const float* x, const float* y, const float* dy,
                            float* dx) {
  PSTRAIN_CUDA_KERNEL_LOOP(i, n) { dx[i] = x[i] > 0.f ? dy[i] : dy[i] * (y[i] + alpha); }
}

}  // namespace

void ELULayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  KeepBottom(bottom, top);
  const int64_t n = bottom[0]->count();
  LaunchKernel(n, EluForward, n, param_.elu_param().alpha(), bottom[0]->gpu_data(),
               top[0]->mutable_gpu_data());
}

void ELULayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                           const BlobVec& bottom) {
  const int64_t n = bottom[0]->count();
  if (!propagate_down[0]) return;
  LaunchKernel(n, EluBackward, n, param_.elu_param().alpha(), BackwardInput(bottom).gpu_data(),
               top[0]->gpu_data(), top[0]->gpu_diff(), bottom[0]->mutable_gpu_diff());
}

}  // namespace pstrain
