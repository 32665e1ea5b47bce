// Dropout on the GPU: the mask of dropout_layer.hpp (the same function of
// the key, the sample's stream position and the element as the CPU paths),
// computed per element in the kernel. Backward recomputes the mask from the
// forward's first sample position instead of storing it.
#include "worker/layers/dropout_layer.hpp"
#include "worker/layers/layer_kernels.cuh"

namespace pstrain {
namespace {

// y[i] = x[i] * scale where the mask keeps element i, else 0; element i is
// element i % inner of sample i / inner, at stream position first + i / inner.
__global__ void DropoutKernel(int64_t n, int64_t inner, uint64_t key, int64_t first,
                              uint32_t threshold, float scale, const float* x, float* y) {
  PSTRAIN_CUDA_KERNEL_LOOP(i, n) {
    const int64_t sample = i / inner;
    const uint64_t sample_key = DropoutSampleKey(key, static_cast<uint64_t>(first + sample));
    const bool keep =
        DropoutBits(sample_key, static_cast<uint64_t>(i - sample * inner)) >= threshold;
    y[i] = keep ? x[i] * scale : 0.f;
  }
}

// Elements per sample (axis 0 is the batch).
int64_t Inner(const Blob& blob) {
  const int64_t samples = blob.num_axes() > 0 ? blob.shape(0) : 1;
  return samples > 0 ? blob.count() / samples : 1;
}

}  // namespace

void DropoutLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  const int64_t n = bottom[0]->count();
  if (n == 0) return;
  if (phase() != caffe::TRAIN) {
    if (bottom[0] != top[0]) GpuCopy(n, bottom[0]->gpu_data(), top[0]->mutable_gpu_data());
    return;
  }
  const int64_t first = NextFirstSample(*bottom[0]);
  LaunchKernel(n, DropoutKernel, n, Inner(*bottom[0]), Key(), first, threshold_, scale_,
               bottom[0]->gpu_data(), top[0]->mutable_gpu_data());
}

void DropoutLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                               const BlobVec& bottom) {
  const int64_t n = top[0]->count();
  if (!propagate_down[0] || n == 0) return;
  if (phase() != caffe::TRAIN) {
    if (bottom[0] != top[0]) GpuCopy(n, top[0]->gpu_diff(), bottom[0]->mutable_gpu_diff());
    return;
  }
  LaunchKernel(n, DropoutKernel, n, Inner(*top[0]), Key(), first_sample_, threshold_, scale_,
               top[0]->gpu_diff(), bottom[0]->mutable_gpu_diff());
}

}  // namespace pstrain
