// Dropout on the GPU. The mask is not the CPU path's (that one comes from a
// sequential mt19937 stream): element i of draw d is kept when
// Bits(key, d, i) / 2^32 >= dropout_ratio, where Bits is a counter-based hash
// and key = MixSeed(context().seed, hash of the layer name). Draw d counts the
// layer's TRAIN forwards from context().start_iter, so a run (and a resumed
// run) is reproducible, and Backward recomputes the mask instead of storing it.
#include <functional>
#include <string>

#include "worker/layers/dropout_layer.hpp"
#include "worker/layers/layer_kernels.cuh"

namespace pstrain {
namespace {

__device__ uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// Mix64 is a bijection: for one (key, draw) distinct indices give distinct words.
__device__ bool Keep(uint64_t key, uint64_t draw, int64_t i, uint32_t threshold) {
  const uint64_t stream = Mix64(key + 0x9E3779B97F4A7C15ULL * (draw + 1));
  const uint64_t word = Mix64(stream + 0x9E3779B97F4A7C15ULL * (static_cast<uint64_t>(i) + 1));
  return static_cast<uint32_t>(word >> 32) >= threshold;
}

__global__ void DropoutKernel(int64_t n, uint64_t key, uint64_t draw, uint32_t threshold,
                              float scale, const float* x, float* y) {
  PSTRAIN_CUDA_KERNEL_LOOP(i, n) { y[i] = Keep(key, draw, i, threshold) ? x[i] * scale : 0.f; }
}

// 2^32 * ratio, rounded down; ratio < 1 so it fits.
uint32_t Threshold(float ratio) {
  return static_cast<uint32_t>(static_cast<double>(ratio) * 4294967296.0);
}

}  // namespace

void DropoutLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  const int64_t n = bottom[0]->count();
  if (n == 0) return;
  if (phase() != caffe::TRAIN) {
    if (bottom[0] != top[0]) GpuCopy(n, bottom[0]->gpu_data(), top[0]->mutable_gpu_data());
    return;
  }
  gpu_draw_ = static_cast<uint64_t>(context().start_iter) + gpu_draws_++;
  const uint64_t key = MixSeed(context().seed, std::hash<std::string>{}(name()));
  LaunchKernel(n, DropoutKernel, n, key, gpu_draw_, Threshold(ratio_), scale_,
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
  const uint64_t key = MixSeed(context().seed, std::hash<std::string>{}(name()));
  LaunchKernel(n, DropoutKernel, n, key, gpu_draw_, Threshold(ratio_), scale_, top[0]->gpu_diff(),
               bottom[0]->mutable_gpu_diff());
}

}  // namespace pstrain
