// HingeLoss on the GPU: the labels are checked on the host (N values); one
// kernel writes the margins, GpuChannelSum adds them (or their squares) in
// double; one kernel writes the gradient.
#include <limits>

#include "worker/layers/hinge_loss_layer.hpp"
#include "worker/layers/layer_kernels.cuh"

namespace pstrain {
namespace {

__global__ void HingeMargins(int64_t count, int dim, const float* x, const float* label, float* m) {
  PSTRAIN_CUDA_KERNEL_LOOP(i, count) {
    const bool target = i % dim == static_cast<int>(label[i / dim]);
    m[i] = fmaxf(0.f, 1.f + (target ? -x[i] : x[i]));
  }
}

__global__ void HingeGradient(int64_t count, int dim, bool l2, float scale, const float* label,
                              const float* m, float* dx) {
  PSTRAIN_CUDA_KERNEL_LOOP(i, count) {
    const float t = i % dim == static_cast<int>(label[i / dim]) ? -1.f : 1.f;
    dx[i] = l2 ? 2.f * t * m[i] * scale : (m[i] > 0.f ? t * scale : 0.f);
  }
}

}  // namespace

void HingeLossLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  if (!CheckLabels(*bottom[1])) {
    top[0]->mutable_cpu_data()[0] = std::numeric_limits<float>::quiet_NaN();
    return;
  }
  const int64_t count = margins_.count();
  if (count == 0) {
    top[0]->mutable_cpu_data()[0] = 0.f;
    return;
  }
  const bool l2 = param_.hinge_loss_param().norm() == caffe::HingeLossParameter::L2;
  float* m = margins_.mutable_gpu_data();
  LaunchKernel(count, HingeMargins, count, dim_, bottom[0]->gpu_data(), bottom[1]->gpu_data(), m);
  // The sum lands in top 0's device memory; read back as its cpu_data.
  GpuChannelSum(1, 1, count, m, l2 ? m : nullptr, false, top[0]->mutable_gpu_data());
  top[0]->mutable_cpu_data()[0] /= static_cast<float>(num_);
}

void HingeLossLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                 const BlobVec& bottom) {
  const int64_t count = bottom[0]->count();
  if (!propagate_down[0] || count == 0) return;
  if (!last_error_.ok()) {
    GpuSet(count, 0.f, bottom[0]->mutable_gpu_diff());
    return;
  }
  const bool l2 = param_.hinge_loss_param().norm() == caffe::HingeLossParameter::L2;
  const float scale = top[0]->cpu_diff()[0] / static_cast<float>(num_);
  LaunchKernel(count, HingeGradient, count, dim_, l2, scale, bottom[1]->gpu_data(),
               margins_.gpu_data(), bottom[0]->mutable_gpu_diff());
}

}  // namespace pstrain
