// EuclideanLoss on the GPU: GpuSub, GpuDot (cuBLAS) and a scaled copy.
#include "worker/layers/euclidean_loss_layer.hpp"
#include "worker/layers/layer_kernels.cuh"

namespace pstrain {

void EuclideanLossLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  const int64_t n = bottom[0]->count();
  const int num = bottom[0]->shape(0);
  float dot = 0.f;
  if (n > 0) {
    float* d = diff_.mutable_gpu_data();
    GpuSub(n, bottom[0]->gpu_data(), bottom[1]->gpu_data(), d);
    dot = GpuDot(n, d, d);
  }
  top[0]->mutable_cpu_data()[0] = num > 0 ? dot / static_cast<float>(num) / 2.f : 0.f;
}

void EuclideanLossLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                     const BlobVec& bottom) {
  const int num = bottom[0]->shape(0);
  if (num == 0 || diff_.count() == 0) return;
  for (int i = 0; i < 2; ++i) {
    if (!propagate_down[i]) continue;
    const float sign = i == 0 ? 1.f : -1.f;
    const float alpha = sign * top[0]->cpu_diff()[0] / static_cast<float>(num);
    GpuScaleCopy(diff_.count(), alpha, diff_.gpu_data(), bottom[i]->mutable_gpu_diff());
  }
}

}  // namespace pstrain
