// ContrastiveLoss on the GPU: one thread per pair computes a - b and the
// squared distance (in double, as the reference); the N distances go to the
// host for the loss (as Caffe's GPU path); the gradient is one kernel.
#include "worker/layers/contrastive_loss_layer.hpp"
#include "worker/layers/layer_kernels.cuh"

namespace pstrain {
namespace {

__global__ void PairDistances(int64_t num, int64_t channels, const float* a, const float* b,
                              float* diff, float* dist_sq) {
  PSTRAIN_CUDA_KERNEL_LOOP(n, num) {
    double sum = 0;
    for (int64_t c = 0; c < channels; ++c) {
      const int64_t i = n * channels + c;
      diff[i] = a[i] - b[i];
      sum += static_cast<double>(diff[i]) * diff[i];
    }
    dist_sq[n] = static_cast<float>(sum);
  }
}

__global__ void PairGradient(int64_t count, int64_t channels, float alpha, float margin,
                             bool legacy, const float* labels, const float* diff,
                             const float* dist_sq, float* out) {
  PSTRAIN_CUDA_KERNEL_LOOP(i, count) {
    const int64_t n = i / channels;
    float factor = alpha;
    if (static_cast<int>(labels[n]) == 0) {
      if (legacy) {
        factor = margin - dist_sq[n] > 0.f ? -alpha : 0.f;
      } else {
        const float dist = sqrtf(dist_sq[n]);
        const float gap = margin - dist;
        factor = gap > 0.f ? -alpha * gap / (dist + 1e-4f) : 0.f;
      }
    }
    out[i] = factor * diff[i];
  }
}

}  // namespace

void ContrastiveLossLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  LaunchKernel(num_, PairDistances, static_cast<int64_t>(num_), channels_, bottom[0]->gpu_data(),
               bottom[1]->gpu_data(), diff_.mutable_gpu_data(), dist_sq_.mutable_gpu_data());
  top[0]->mutable_cpu_data()[0] = LossFromDistances(bottom[2]->cpu_data());
}

void ContrastiveLossLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                       const BlobVec& bottom) {
  if (num_ == 0) return;
  const caffe::ContrastiveLossParameter& p = param_.contrastive_loss_param();
  const int64_t count = diff_.count();
  for (int i = 0; i < 2; ++i) {
    if (!propagate_down[i]) continue;
    const float alpha = (i == 0 ? 1.f : -1.f) * top[0]->cpu_diff()[0] / static_cast<float>(num_);
    LaunchKernel(count, PairGradient, count, channels_, alpha, p.margin(), p.legacy_version(),
                 bottom[2]->gpu_data(), diff_.gpu_data(), dist_sq_.gpu_data(),
                 bottom[i]->mutable_gpu_diff());
  }
}

}  // namespace pstrain
