// InfogainLoss on the GPU: the inner Softmax runs its GPU path; labels, the
// row sums of H (K x K) and the normaliser come from the host (Prepare); one
// kernel writes each position's loss term, GpuChannelSum adds them in
// double; one kernel writes the gradient.
#include <limits>

#include "worker/layers/infogain_loss_layer.hpp"
#include "worker/layers/layer_kernels.cuh"

namespace pstrain {
namespace {

__global__ void InfogainTerms(int64_t positions, int classes, int64_t inner, const float* prob,
                              const float* label, const float* counted, const float* h,
                              float* terms) {
  PSTRAIN_CUDA_KERNEL_LOOP(pos, positions) {
    terms[pos] = 0.f;
    if (counted[pos] == 0.f) continue;
    const float* row = h + static_cast<int64_t>(label[pos]) * classes;
    const float* p = prob + (pos / inner) * classes * inner + pos % inner;
    double sum = 0;
    for (int l = 0; l < classes; ++l) sum -= row[l] * logf(fmaxf(p[l * inner], 1e-20f));
    terms[pos] = static_cast<float>(sum);
  }
}

__global__ void InfogainGradient(int64_t positions, int classes, int64_t inner, float scale,
                                 const float* prob, const float* label, const float* counted,
                                 const float* h, const float* sums, float* diff) {
  PSTRAIN_CUDA_KERNEL_LOOP(pos, positions) {
    const int64_t base = (pos / inner) * classes * inner + pos % inner;
    if (counted[pos] == 0.f) {
      for (int l = 0; l < classes; ++l) diff[base + l * inner] = 0.f;
      continue;
    }
    const int k = static_cast<int>(label[pos]);
    for (int l = 0; l < classes; ++l) {
      diff[base + l * inner] = scale * (prob[base + l * inner] * sums[k] - h[k * classes + l]);
    }
  }
}

}  // namespace

void InfogainLossLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  Prepare(bottom);
  const int64_t positions = outer_ * inner_;
  std::copy(counted_.begin(), counted_.end(), counted_blob_.mutable_cpu_data());
  terms_.Reshape({static_cast<int>(positions)});
  float* loss = top[0]->mutable_gpu_data();
  GpuSet(1, 0.f, loss);
  if (positions > 0 && classes_ > 0) {
    LaunchKernel(positions, InfogainTerms, positions, classes_, inner_, prob_.gpu_data(),
                 bottom[1]->gpu_data(), counted_blob_.gpu_data(), Infogain(bottom).gpu_data(),
                 terms_.mutable_gpu_data());
    GpuChannelSum(1, 1, positions, terms_.gpu_data(), nullptr, false, loss);
  }
  float* host = top[0]->mutable_cpu_data();
  host[0] = last_error_.ok() ? host[0] / normalizer_ : std::numeric_limits<float>::quiet_NaN();
  if (top.size() == 2 && prob_.count() > 0) {
    GpuCopy(prob_.count(), prob_.gpu_data(), top[1]->mutable_gpu_data());
  }
}

void InfogainLossLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                    const BlobVec& bottom) {
  const int64_t positions = outer_ * inner_;
  if (!propagate_down[0] || positions == 0 || classes_ == 0) return;
  const float scale = top[0]->cpu_diff()[0] / normalizer_;
  LaunchKernel(positions, InfogainGradient, positions, classes_, inner_, scale, prob_.gpu_data(),
               bottom[1]->gpu_data(), counted_blob_.gpu_data(), Infogain(bottom).gpu_data(),
               row_sums_.gpu_data(), bottom[0]->mutable_gpu_diff());
}

}  // namespace pstrain
