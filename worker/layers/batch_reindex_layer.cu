// BatchReindex on the GPU: the indices are checked on the host (K values);
// one thread per top value forward; backward one thread per bottom value,
// adding the top diffs that picked its sample in the reference's order.
#include "worker/layers/batch_reindex_layer.hpp"
#include "worker/layers/layer_kernels.cuh"

namespace pstrain {
namespace {

__device__ bool Picks(float index, int64_t num) {
  return index >= 0.f && index < static_cast<float>(num);
}

__global__ void ReindexForward(int64_t count, int64_t inner, int64_t num, const float* x,
                               const float* index, float* y) {
  PSTRAIN_CUDA_KERNEL_LOOP(i, count) {
    const float v = index[i / inner];
    y[i] = Picks(v, num) ? x[static_cast<int64_t>(v) * inner + i % inner] : 0.f;
  }
}

__global__ void ReindexBackward(int64_t count, int64_t inner, int64_t num, int64_t picks,
                                const float* index, const float* dy, float* dx) {
  PSTRAIN_CUDA_KERNEL_LOOP(i, count) {
    const int64_t n = i / inner, j = i % inner;
    float sum = 0.f;
    for (int64_t k = 0; k < picks; ++k) {
      const float v = index[k];
      if (Picks(v, num) && static_cast<int64_t>(v) == n) sum += dy[k * inner + j];
    }
    dx[i] = sum;
  }
}

}  // namespace

void BatchReindexLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  CheckIndices(*bottom[1]);
  const int64_t count = top[0]->count();
  LaunchKernel(count, ReindexForward, count, inner_, num_, bottom[0]->gpu_data(),
               bottom[1]->gpu_data(), top[0]->mutable_gpu_data());
}

void BatchReindexLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                    const BlobVec& bottom) {
  const int64_t count = bottom[0]->count();
  if (!propagate_down[0]) return;
  LaunchKernel(count, ReindexBackward, count, inner_, num_, picks_, bottom[1]->gpu_data(),
               top[0]->gpu_diff(), bottom[0]->mutable_gpu_diff());
}

}  // namespace pstrain
