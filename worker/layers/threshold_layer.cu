// Threshold on the GPU: an own kernel; the backward writes zeros.
#include "worker/layers/layer_kernels.cuh"
#include "worker/layers/threshold_layer.hpp"

namespace pstrain {
namespace {

__global__ void ThresholdForward(int64_t n, float threshold, const float* x, float* y) {
  PSTRAIN_CUDA_KERNEL_LOOP(i, n) { y[i] = x[i] > threshold ? 1.f : 0.f; }
}

}  // namespace

void ThresholdLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  const int64_t n = bottom[0]->count();
  LaunchKernel(n, ThresholdForward, n, param_.threshold_param().threshold(), bottom[0]->gpu_data(),
               top[0]->mutable_gpu_data());
}

void ThresholdLayer::BackwardGpu(const BlobVec& /*top*/, const std::vector<bool>& propagate_down,
                                 const BlobVec& bottom) {
  const int64_t n = bottom[0]->count();
  if (!propagate_down[0] || n == 0) return;
  GpuSet(n, 0.f, bottom[0]->mutable_gpu_diff());
}

}  // namespace pstrain
