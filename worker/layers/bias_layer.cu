// Bias on the GPU: own broadcast kernel; the bias gradient is GpuChannelSum.
#include "worker/layers/bias_layer.hpp"
#include "worker/layers/layer_kernels.cuh"

namespace pstrain {
namespace {

template <typename Index>
__global__ void BroadcastAddKernel(Index n, Index dim, Index inner, const float* bias,
                                   float* data) {
  PSTRAIN_CUDA_INDEX_LOOP(Index, i, n) { data[i] += bias[(i / inner) % dim]; }
}

}  // namespace

void BiasLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  const int64_t n = top[0]->count();
  if (n == 0) return;
  const float* bias = bottom.size() > 1 ? bottom[1]->gpu_data() : blobs_[0]->gpu_data();
  if (bottom[0] != top[0]) GpuCopy(n, bottom[0]->gpu_data(), top[0]->mutable_gpu_data());
  LaunchIndexed(n, BroadcastAddKernel<uint32_t>, BroadcastAddKernel<int64_t>, n, broadcast_.dim,
                broadcast_.inner, bias, top[0]->mutable_gpu_data());
}

void BiasLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                            const BlobVec& bottom) {
  const AxisBroadcast& b = broadcast_;
  const float* dy = top[0]->gpu_diff();
  if (propagate_down[0] && bottom[0] != top[0] && top[0]->count() > 0) {
    GpuCopy(top[0]->count(), dy, bottom[0]->mutable_gpu_diff());
  }
  if (bottom.size() > 1) {
    if (propagate_down[1]) {
      GpuChannelSum(b.outer, b.dim, b.inner, dy, nullptr, false, bottom[1]->mutable_gpu_diff());
    }
  } else if (param_propagate_down(0)) {
    GpuChannelSum(b.outer, b.dim, b.inner, dy, nullptr, true, blobs_[0]->mutable_gpu_diff());
  }
}

}  // namespace pstrain
