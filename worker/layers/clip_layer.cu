// Clip on the GPU: own kernels, the reference's formulas.
#include "worker/layers/clip_layer.hpp"
#include "worker/layers/layer_kernels.cuh"

namespace pstrain {
namespace {

__global__ void ClipForward(int64_t n, float lo, float hi, const float* x, float* y) {
  PSTRAIN_CUDA_KERNEL_LOOP(i, n) { y[i] = fmaxf(lo, fminf(x[i], hi)); }
}

__global__ void ClipBackward(int64_t n, float lo, float hi, const float* x, const float* dy,
                             float* dx) {
  PSTRAIN_CUDA_KERNEL_LOOP(i, n) { dx[i] = x[i] >= lo && x[i] <= hi ? dy[i] : 0.f; }
}

}  // namespace

void ClipLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  KeepBottom(bottom, top);
  const int64_t n = bottom[0]->count();
  const caffe::ClipParameter& p = param_.clip_param();
  LaunchKernel(n, ClipForward, n, p.min(), p.max(), bottom[0]->gpu_data(),
               top[0]->mutable_gpu_data());
}

void ClipLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                            const BlobVec& bottom) {
  const int64_t n = bottom[0]->count();
  if (!propagate_down[0]) return;
  const caffe::ClipParameter& p = param_.clip_param();
  LaunchKernel(n, ClipBackward, n, p.min(), p.max(), BackwardInput(bottom).gpu_data(),
               top[0]->gpu_diff(), bottom[0]->mutable_gpu_diff());
}

}  // namespace pstrain
