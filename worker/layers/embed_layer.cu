// Embed on the GPU: a gather kernel forward; the weight gradient scattered
// with atomicAdd (rows repeat when an index does), the bias gradient a column
// sum. The indices are checked on the host first (EmbedLayer::CheckIndices).
#include "worker/layers/embed_layer.hpp"
#include "worker/layers/layer_kernels.cuh"

namespace pstrain {
namespace {

__device__ bool ValidIndex(float v, int input_dim) {
  return v >= 0.f && v < static_cast<float>(input_dim) && v == floorf(v);
}

__global__ void EmbedForward(int64_t count, int num_output, int input_dim, const float* idx,
                             const float* w, const float* bias, float* y) {
  PSTRAIN_CUDA_KERNEL_LOOP(k, count) {
    const int64_t i = k / num_output;
    const int64_t j = k % num_output;
    const float v = idx[i];
    float out = ValidIndex(v, input_dim) ? w[static_cast<int64_t>(v) * num_output + j] : 0.f;
    if (bias != nullptr) out += bias[j];
    y[k] = out;
  }
}

__global__ void EmbedWeightGrad(int64_t count, int num_output, int input_dim, const float* idx,
                                const float* dy, float* dw) {
  PSTRAIN_CUDA_KERNEL_LOOP(k, count) {
    const int64_t i = k / num_output;
    const int64_t j = k % num_output;
    const float v = idx[i];
    if (ValidIndex(v, input_dim)) atomicAdd(dw + static_cast<int64_t>(v) * num_output + j, dy[k]);
  }
}

}  // namespace

void EmbedLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  CheckIndices(*bottom[0]);
  const int64_t count = m_ * num_output_;
  LaunchKernel(count, EmbedForward, count, num_output_, input_dim_, bottom[0]->gpu_data(),
               blobs_[0]->gpu_data(), bias_term_ ? blobs_[1]->gpu_data() : nullptr,
               top[0]->mutable_gpu_data());
}

void EmbedLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& /*propagate_down*/,
                             const BlobVec& bottom) {
  const int64_t count = m_ * num_output_;
  if (param_propagate_down(0)) {
    LaunchKernel(count, EmbedWeightGrad, count, num_output_, input_dim_, bottom[0]->gpu_data(),
                 top[0]->gpu_diff(), blobs_[0]->mutable_gpu_diff());
  }
  if (bias_term_ && param_propagate_down(1) && m_ > 0) {
    GpuChannelSum(m_, num_output_, 1, top[0]->gpu_diff(), nullptr, true,
                  blobs_[1]->mutable_gpu_diff());
  }
}

}  // namespace pstrain
