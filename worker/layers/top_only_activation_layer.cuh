// The GPU path of TopOnlyActivationLayer<Math>: one kernel per direction,
// Math's formulas per element. A layer's .cu file includes this and
// instantiates it: PSTRAIN_INSTANTIATE_TOP_ONLY_ACTIVATION_GPU(SigmoidMath).
#pragma once

#include "worker/layers/layer_kernels.cuh"
#include "worker/layers/top_only_activation_layer.hpp"

namespace pstrain {

template <class Math>
__global__ void TopOnlyActivationForward(int64_t n, const float* x, float* y) {
  PSTRAIN_CUDA_KERNEL_LOOP(i, n) { y[i] = Math::Forward(x[i]); }
}

template <class Math>
__global__ void TopOnlyActivationBackward(int64_t n, const float* y, const float* dy, float* dx) {
  PSTRAIN_CUDA_KERNEL_LOOP(i, n) { dx[i] = Math::Backward(y[i], dy[i]); }
}

template <class Math>
void TopOnlyActivationLayer<Math>::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  const int64_t n = bottom[0]->count();
  if (n == 0) return;
  LaunchKernel(n, TopOnlyActivationForward<Math>, n, bottom[0]->gpu_data(),
               top[0]->mutable_gpu_data());
}

template <class Math>
void TopOnlyActivationLayer<Math>::BackwardGpu(const BlobVec& top,
                                               const std::vector<bool>& propagate_down,
                                               const BlobVec& bottom) {
  const int64_t n = top[0]->count();
  if (!propagate_down[0] || n == 0) return;
  LaunchKernel(n, TopOnlyActivationBackward<Math>, n, top[0]->gpu_data(), top[0]->gpu_diff(),
               bottom[0]->mutable_gpu_diff());
}

}  // namespace pstrain

#define PSTRAIN_INSTANTIATE_TOP_ONLY_ACTIVATION_GPU(Math)                                       \
  template void ::pstrain::TopOnlyActivationLayer<Math>::ForwardGpu(const ::pstrain::BlobVec&,  \
                                                                    const ::pstrain::BlobVec&); \
  template void ::pstrain::TopOnlyActivationLayer<Math>::BackwardGpu(                           \
      const ::pstrain::BlobVec&, const std::vector<bool>&, const ::pstrain::BlobVec&)
