// Split on the GPU: the tops share the bottom's data; Backward sums the top
// gradients in the reference's order.
#include "worker/layers/layer_kernels.cuh"
#include "worker/layers/split_layer.hpp"

namespace pstrain {

void SplitLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                             const BlobVec& bottom) {
  const int64_t n = bottom[0]->count();
  if (!propagate_down[0] || n == 0) return;
  float* dx = bottom[0]->mutable_gpu_diff();
  GpuCopy(n, top[0]->gpu_diff(), dx);
  for (size_t i = 1; i < top.size(); ++i) GpuAxpy(n, 1.f, top[i]->gpu_diff(), dx);
}

}  // namespace pstrain
