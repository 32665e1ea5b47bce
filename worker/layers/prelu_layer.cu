// PReLU on the GPU: own kernels; the slopes' gradient through GpuChannelSum
// (deterministic) of the per-element terms dy * x * (x <= 0).
#include "worker/layers/layer_kernels.cuh"
#include "worker/layers/prelu_layer.hpp"

namespace pstrain {
namespace {

__global__ void PreluForward(int64_t n, int channels, int64_t inner, bool shared,
                             const float* slope, const float* x, float* y) {
  PSTRAIN_CUDA_KERNEL_LOOP(i, n) {
    const float a = slope[shared ? 0 : (i / inner) % channels];
    y[i] = x[i] > 0.f ? x[i] : a * x[i];
  }
}

__global__ void PreluBottomBackward(int64_t n, int channels, int64_t inner, bool shared,
                                    const float* slope, const float* x, const float* dy,
                                    float* dx) {
  PSTRAIN_CUDA_KERNEL_LOOP(i, n) {
    const float a = slope[shared ? 0 : (i / inner) % channels];
    dx[i] = x[i] > 0.f ? dy[i] : a * dy[i];
  }
}

// terms[i] = dy * x where x <= 0, else 0.
__global__ void PreluSlopeTerms(int64_t n, const float* x, const float* dy, float* terms) {
  PSTRAIN_CUDA_KERNEL_LOOP(i, n) { terms[i] = x[i] <= 0.f ? dy[i] * x[i] : 0.f; }
}

}  // namespace

void PReLULayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  KeepBottom(bottom, top);
  const int64_t n = bottom[0]->count();
  LaunchKernel(n, PreluForward, n, channels_, inner_, shared_, blobs_[0]->gpu_data(),
               bottom[0]->gpu_data(), top[0]->mutable_gpu_data());
}

void PReLULayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                             const BlobVec& bottom) {
  const int64_t n = bottom[0]->count();
  if (n == 0) return;
  const float* x = BackwardInput(bottom).gpu_data();
  if (param_propagate_down(0)) {
    slope_terms_.ReshapeLike(*top[0]);
    LaunchKernel(n, PreluSlopeTerms, n, x, top[0]->gpu_diff(), slope_terms_.mutable_gpu_data());
    const int64_t outer = shared_ ? 1 : n / (channels_ * inner_);
    const int64_t dim = shared_ ? 1 : channels_;
    const int64_t inner = shared_ ? n : inner_;
    GpuChannelSum(outer, dim, inner, slope_terms_.gpu_data(), nullptr, /*accumulate=*/true,
                  blobs_[0]->mutable_gpu_diff());
  }
  if (!propagate_down[0]) return;
  LaunchKernel(n, PreluBottomBackward, n, channels_, inner_, shared_, blobs_[0]->gpu_data(), x,
               top[0]->gpu_diff(), bottom[0]->mutable_gpu_diff());
}

}  // namespace pstrain
