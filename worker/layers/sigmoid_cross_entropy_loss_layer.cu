// SigmoidCrossEntropyLoss on the GPU: a kernel writes each element's loss
// term and whether it counts; GpuChannelSum adds them up (in double); the
// scalar loss is finished on the host.
#include "worker/layers/layer_kernels.cuh"
#include "worker/layers/sigmoid_cross_entropy_loss_layer.hpp"

namespace pstrain {
namespace {

// The reference's Ignored(): an in-range target that truncates to the label.
__device__ bool IgnoredTarget(float t, bool has_ignore_label, int ignore_label) {
  return has_ignore_label && t > -2147483648.f && t < 2147483648.f &&
         static_cast<int>(t) == ignore_label;
}

__global__ void LossTerms(int64_t n, const float* x, const float* t, bool has_ignore_label,
                          int ignore_label, float* terms, float* counted) {
  PSTRAIN_CUDA_KERNEL_LOOP(i, n) {
    if (IgnoredTarget(t[i], has_ignore_label, ignore_label)) {
      terms[i] = 0.f;
      counted[i] = 0.f;
    } else {
      const float positive = x[i] >= 0 ? 1.f : 0.f;
      terms[i] = -(x[i] * (t[i] - positive) - log1pf(expf(x[i] - 2 * x[i] * positive)));
      counted[i] = 1.f;
    }
  }
}

__global__ void LossGradient(int64_t n, float scale, const float* x, const float* t,
                             bool has_ignore_label, int ignore_label, float* diff) {
  PSTRAIN_CUDA_KERNEL_LOOP(i, n) {
    const float sigmoid = 1.f / (1.f + expf(-x[i]));
    diff[i] = IgnoredTarget(t[i], has_ignore_label, ignore_label) ? 0.f : scale * (sigmoid - t[i]);
  }
}

}  // namespace

void SigmoidCrossEntropyLossLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  const int64_t n = bottom[0]->count();
  gpu_terms_.ReshapeLike(*bottom[0]);
  gpu_counted_.ReshapeLike(*bottom[0]);
  gpu_sums_.Reshape({2});
  float* sums = gpu_sums_.mutable_gpu_data();
  GpuSet(2, 0.f, sums);
  if (n > 0) {
    LaunchKernel(n, LossTerms, n, bottom[0]->gpu_data(), bottom[1]->gpu_data(), has_ignore_label_,
                 ignore_label_, gpu_terms_.mutable_gpu_data(), gpu_counted_.mutable_gpu_data());
    GpuChannelSum(1, 1, n, gpu_terms_.gpu_data(), nullptr, false, sums);
    GpuChannelSum(1, 1, n, gpu_counted_.gpu_data(), nullptr, false, sums + 1);
  }
  const float* host = gpu_sums_.cpu_data();
  const int64_t valid = static_cast<int64_t>(host[1]);
  normalizer_ = LossNormalizer(normalization_, bottom[0]->shape(0), bottom[0]->count(1), valid);
  top[0]->mutable_cpu_data()[0] = host[0] / normalizer_;
}

void SigmoidCrossEntropyLossLayer::BackwardGpu(const BlobVec& top,
                                               const std::vector<bool>& propagate_down,
                                               const BlobVec& bottom) {
  const int64_t n = bottom[0]->count();
  if (!propagate_down[0] || n == 0) return;
  const float scale = top[0]->cpu_diff()[0] / normalizer_;
  LaunchKernel(n, LossGradient, n, scale, bottom[0]->gpu_data(), bottom[1]->gpu_data(),
               has_ignore_label_, ignore_label_, bottom[0]->mutable_gpu_diff());
}

}  // namespace pstrain
