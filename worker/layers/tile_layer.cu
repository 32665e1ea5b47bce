// Tile on the GPU: one thread per top value forward, one per bottom value
// (summing its copies in the reference's order) backward.
#include "worker/layers/layer_kernels.cuh"
#include "worker/layers/tile_layer.hpp"

namespace pstrain {
namespace {

__global__ void TileForward(int64_t count, int tiles, int64_t inner, const float* x, float* y) {
  PSTRAIN_CUDA_KERNEL_LOOP(i, count) {
    const int64_t o = i / (inner * tiles);
    y[i] = x[o * inner + i % inner];
  }
}

__global__ void TileBackward(int64_t count, int tiles, int64_t inner, const float* dy, float* dx) {
  PSTRAIN_CUDA_KERNEL_LOOP(i, count) {
    const int64_t o = i / inner, k = i % inner;
    float sum = 0.f;
    for (int t = 0; t < tiles; ++t) sum += dy[(o * tiles + t) * inner + k];
    dx[i] = sum;
  }
}

}  // namespace

void TileLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  const int64_t count = top[0]->count();
  LaunchKernel(count, TileForward, count, tiles_, inner_, bottom[0]->gpu_data(),
               top[0]->mutable_gpu_data());
}

void TileLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                            const BlobVec& bottom) {
  const int64_t count = bottom[0]->count();
  if (!propagate_down[0]) return;
  LaunchKernel(count, TileBackward, count, tiles_, inner_, top[0]->gpu_diff(),
               bottom[0]->mutable_gpu_diff());
}

}  // namespace pstrain
