// Power on the GPU: own kernels, the reference's formulas.
#include <cmath>

#include "worker/layers/layer_kernels.cuh"
#include "worker/layers/power_layer.hpp"

namespace pstrain {
namespace {

__global__ void PowerForward(int64_t n, float power, float scale, float shift, const float* x,
                             float* y) {
  PSTRAIN_CUDA_KERNEL_LOOP(i, n) { y[i] = powf(shift + scale * x[i], power); }
}

__global__ void PowerBackward(int64_t n, float power, float scale, float shift, const float* x,
                              const float* dy, float* dx) {
  PSTRAIN_CUDA_KERNEL_LOOP(i, n) {
    dx[i] = dy[i] * power * scale * powf(shift + scale * x[i], power - 1.f);
  }
}

}  // namespace

void PowerLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  KeepBottom(bottom, top);
  const int64_t n = bottom[0]->count();
  const caffe::PowerParameter& p = param_.power_param();
  if (p.power() * p.scale() == 0.f) {
    GpuSet(n, p.power() == 0.f ? 1.f : std::pow(p.shift(), p.power()), top[0]->mutable_gpu_data());
    return;
  }
  LaunchKernel(n, PowerForward, n, p.power(), p.scale(), p.shift(), bottom[0]->gpu_data(),
               top[0]->mutable_gpu_data());
}

void PowerLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                             const BlobVec& bottom) {
  const int64_t n = bottom[0]->count();
  if (!propagate_down[0]) return;
  const caffe::PowerParameter& p = param_.power_param();
  if (p.power() * p.scale() == 0.f) {
    GpuSet(n, 0.f, bottom[0]->mutable_gpu_diff());
    return;
  }
  LaunchKernel(n, PowerBackward, n, p.power(), p.scale(), p.shift(),
               BackwardInput(bottom).gpu_data(), top[0]->gpu_diff(), bottom[0]->mutable_gpu_diff());
}

}  // namespace pstrain
