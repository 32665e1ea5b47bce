// MultinomialLogisticLoss on the GPU: the labels are checked on the host (N
// values); one kernel writes the N loss terms, which the host adds in double
// as the reference does; one kernel writes the gradient.
#include <limits>

#include "worker/layers/layer_kernels.cuh"
#include "worker/layers/multinomial_logistic_loss_layer.hpp"

namespace pstrain {
namespace {

__global__ void LogisticTerms(int64_t num, int dim, const float* p, const float* label,
                              float* terms) {
  PSTRAIN_CUDA_KERNEL_LOOP(n, num) {
    terms[n] = -logf(fmaxf(p[n * dim + static_cast<int>(label[n])], 1e-20f));
  }
}

__global__ void LogisticGradient(int64_t num, int dim, float scale, const float* p,
                                 const float* label, float* dx) {
  PSTRAIN_CUDA_KERNEL_LOOP(n, num) {
    const int64_t i = n * dim + static_cast<int>(label[n]);
    dx[i] = scale / fmaxf(p[i], 1e-20f);
  }
}

}  // namespace

void MultinomialLogisticLossLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  if (!CheckLabels(*bottom[1])) {
    top[0]->mutable_cpu_data()[0] = std::numeric_limits<float>::quiet_NaN();
    return;
  }
  LaunchKernel(num_, LogisticTerms, static_cast<int64_t>(num_), dim_, bottom[0]->gpu_data(),
               bottom[1]->gpu_data(), terms_.mutable_gpu_data());
  const float* terms = terms_.cpu_data();
  double loss = 0;
  for (int n = 0; n < num_; ++n) loss += terms[n];
  top[0]->mutable_cpu_data()[0] = num_ > 0 ? static_cast<float>(loss / num_) : 0.f;
}

void MultinomialLogisticLossLayer::BackwardGpu(const BlobVec& top,
                                               const std::vector<bool>& propagate_down,
                                               const BlobVec& bottom) {
  const int64_t count = bottom[0]->count();
  if (!propagate_down[0] || num_ == 0 || count == 0) return;
  GpuSet(count, 0.f, bottom[0]->mutable_gpu_diff());
  if (!last_error_.ok()) return;
  const float scale = -top[0]->cpu_diff()[0] / static_cast<float>(num_);
  LaunchKernel(num_, LogisticGradient, static_cast<int64_t>(num_), dim_, scale,
               bottom[0]->gpu_data(), bottom[1]->gpu_data(), bottom[0]->mutable_gpu_diff());
}

}  // namespace pstrain
