// Log on the GPU: own kernels, the reference's formulas.
#include "worker/layers/layer_kernels.cuh"
#include "worker/layers/log_layer.hpp"

namespace pstrain {
namespace {

__global__ void LogForward(int64_t n, float scale, float shift, float base_scale, const float* x,
                           float* y) {
  PSTRAIN_CUDA_KERNEL_LOOP(i, n) { y[i] = logf(shift + scale * x[i]) * base_scale; }
}

__global__ void LogBackward(int64_t n, float scale, float shift, float numerator, const float* x,
                            const float* dy, float* dx) {
  PSTRAIN_CUDA_KERNEL_LOOP(i, n) { dx[i] = dy[i] * numerator / (shift + scale * x[i]); }
}

}  // namespace

void LogLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  KeepBottom(bottom, top);
  const int64_t n = bottom[0]->count();
  const caffe::LogParameter& p = param_.log_param();
  LaunchKernel(n, LogForward, n, p.scale(), p.shift(), base_scale_, bottom[0]->gpu_data(),
               top[0]->mutable_gpu_data());
}

void LogLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                           const BlobVec& bottom) {
  const int64_t n = bottom[0]->count();
  if (!propagate_down[0]) return;
  const caffe::LogParameter& p = param_.log_param();
  LaunchKernel(n, LogBackward, n, p.scale(), p.shift(), p.scale() * base_scale_,
               BackwardInput(bottom).gpu_data(), top[0]->gpu_diff(), bottom[0]->mutable_gpu_diff());
}

}  // namespace pstrain
