// ReLU on the GPU: own kernels (leaky or not), Caffe's formulas exactly.
#include "worker/layers/layer_kernels.cuh"
#include "worker/layers/relu_layer.hpp"

namespace pstrain {
namespace {

__global__ void ReluForward(int64_t n, float slope, const float* x, float* y) {
  PSTRAIN_CUDA_KERNEL_LOOP(i, n) { y[i] = x[i] > 0.f ? x[i] : slope * x[i]; }
}

__global__ void ReluBackward(int64_t n, float slope, const float* x, const float* dy, float* dx) {
  PSTRAIN_CUDA_KERNEL_LOOP(i, n) { dx[i] = x[i] > 0.f ? dy[i] : slope * dy[i]; }
}

}  // namespace

void GpuReluBackward(int64_t n, float slope, const float* x, const float* dy, float* dx) {
  LaunchKernel(n, ReluBackward, n, slope, x, dy, dx);
}

void ReLULayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  if (fused()) return;  // applied by the Forward of the layer it is fused into
  const int64_t n = bottom[0]->count();
  if (n == 0) return;
  LaunchKernel(n, ReluForward, n, param_.relu_param().negative_slope(), bottom[0]->gpu_data(),
               top[0]->mutable_gpu_data());
}

void ReLULayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                            const BlobVec& bottom) {
  if (fused()) return;  // applied by the fused backward (the Scale's or the Eltwise's)
  const int64_t n = bottom[0]->count();
  if (!propagate_down[0] || n == 0) return;
  GpuReluBackward(n, param_.relu_param().negative_slope(), bottom[0]->gpu_data(),
                  top[0]->gpu_diff(), bottom[0]->mutable_gpu_diff());
}

}  // namespace pstrain
