// SoftmaxWithLoss on the GPU: own kernels. The softmax (GpuSoftmax) runs one
// thread per (outer, inner) position over the classes, as the reference does;
// a second kernel writes each position's loss term and whether it counts or holds a
// broken label; GpuChannelSum adds them up (in double). A broken label is
// found on the host (one position scan, only then) so that RuntimeStatus()
// reports the reference's message.
#include <cfloat>
#include <limits>
#include <utility>

#include "worker/layers/layer_kernels.cuh"
#include "worker/layers/softmax_loss_layer.hpp"

namespace pstrain {
namespace {

// Per position: the loss term, 1/0 counted, 1/0 broken label.
__global__ void LossTerms(int64_t positions, int channels, int64_t inner, const float* prob,
                          const float* label, bool has_ignore_label, int ignore_label, float* terms,
                          float* counted, float* broken) {
  PSTRAIN_CUDA_KERNEL_LOOP(pos, positions) {
    const float value = label[pos];
    const bool readable = value > -2147483648.f && value < 2147483648.f;
    const int cls = readable ? static_cast<int>(value) : 0;
    terms[pos] = 0.f;
    counted[pos] = 0.f;
    broken[pos] = 0.f;
    if (readable && has_ignore_label && cls == ignore_label) continue;
    if (!readable || cls < 0 || cls >= channels) {
      broken[pos] = 1.f;
      continue;
    }
    const int64_t base = (pos / inner) * channels * inner + pos % inner;
    terms[pos] = -logf(fmaxf(prob[base + cls * inner], FLT_MIN));
    counted[pos] = 1.f;
  }
}

__global__ void LossGradient(int64_t positions, int channels, int64_t inner, float scale,
                             const float* prob, const float* label, const float* counted,
                             float* diff) {
  PSTRAIN_CUDA_KERNEL_LOOP(pos, positions) {
    const int64_t base = (pos / inner) * channels * inner + pos % inner;
    if (counted[pos] == 0.f) {
      for (int c = 0; c < channels; ++c) diff[base + c * inner] = 0.f;
      continue;
    }
    const int cls = static_cast<int>(label[pos]);
    for (int c = 0; c < channels; ++c) {
      diff[base + c * inner] = scale * (prob[base + c * inner] - (c == cls ? 1.f : 0.f));
    }
  }
}

// The reference's error for the first position flagged in `broken`.
// REQUIRES: one is flagged.
Status FirstBrokenLabel(const Blob& broken, const Blob& label, int channels) {
  const float* flags = broken.cpu_data();
  int64_t index = 0;
  while (flags[index] == 0.f) ++index;
  return Status::Error(LabelOutOfRangeMessage(label.cpu_data()[index], index, channels));
}

}  // namespace

void SoftmaxWithLossLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  const int64_t positions = outer_ * inner_;
  gpu_terms_.ReshapeLike(*bottom[1]);
  gpu_counted_.ReshapeLike(*bottom[1]);
  gpu_broken_.ReshapeLike(*bottom[1]);
  gpu_sums_.Reshape({3});
  float* sums = gpu_sums_.mutable_gpu_data();
  GpuSet(3, 0.f, sums);
  if (positions > 0 && channels_ > 0) {
    float* prob = prob_.mutable_gpu_data();
    GpuSoftmax(outer_, channels_, inner_, bottom[0]->gpu_data(), prob);
    LaunchKernel(positions, LossTerms, positions, channels_, inner_,
                 static_cast<const float*>(prob), bottom[1]->gpu_data(), has_ignore_label_,
                 ignore_label_, gpu_terms_.mutable_gpu_data(), gpu_counted_.mutable_gpu_data(),
                 gpu_broken_.mutable_gpu_data());
    GpuChannelSum(1, 1, positions, gpu_terms_.gpu_data(), nullptr, false, sums);
    GpuChannelSum(1, 1, positions, gpu_counted_.gpu_data(), nullptr, false, sums + 1);
    GpuChannelSum(1, 1, positions, gpu_broken_.gpu_data(), nullptr, false, sums + 2);
  }
  const float* host = gpu_sums_.cpu_data();
  Status error = host[2] > 0.f ? FirstBrokenLabel(gpu_broken_, *bottom[1], channels_) : Status();
  std::swap(last_error_, error);  // (nvcc warns on assigning a [[nodiscard]] type)
  normalizer_ = LossNormalizer(normalization_, outer_, inner_, static_cast<int64_t>(host[1]));
  top[0]->mutable_cpu_data()[0] =
      last_error_.ok() ? host[0] / normalizer_ : std::numeric_limits<float>::quiet_NaN();
  if (top.size() == 2 && prob_.count() > 0) {
    GpuCopy(prob_.count(), prob_.gpu_data(), top[1]->mutable_gpu_data());
  }
}

void SoftmaxWithLossLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                       const BlobVec& bottom) {
  const int64_t positions = outer_ * inner_;
  if (!propagate_down[0] || positions == 0 || channels_ == 0) return;
  const float scale = top[0]->cpu_diff()[0] / normalizer_;
  LaunchKernel(positions, LossGradient, positions, channels_, inner_, scale, prob_.gpu_data(),
               bottom[1]->gpu_data(), gpu_counted_.gpu_data(), bottom[0]->mutable_gpu_diff());
}

}  // namespace pstrain
