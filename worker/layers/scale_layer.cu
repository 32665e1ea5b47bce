// Scale on the GPU: own broadcast kernels; the scale and bias gradients are
// GpuChannelSum reductions (summed in double, as the reference does).
#include "worker/layers/batch_norm_layer.hpp"
#include "worker/layers/layer_kernels.cuh"
#include "worker/layers/scale_layer.hpp"

namespace pstrain {
namespace {

// y = x * scale[d] (+ bias[d]) with d = (i / inner) % dim; bias may be null.
template <typename Index>
__global__ void ScaleKernel(Index n, Index dim, Index inner, const float* x, const float* scale,
                            const float* bias, float* y) {
  PSTRAIN_CUDA_INDEX_LOOP(Index, i, n) {
    const Index d = (i / inner) % dim;
    const float scaled = x[i] * scale[d];
    y[i] = bias == nullptr ? scaled : scaled + bias[d];
  }
}

}  // namespace

void ScaleLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  if (fused_into_ != nullptr) return;  // the BatchNorm's Forward wrote the result
  const int64_t n = bottom[0]->count();
  if (n == 0) return;
  const float* x = bottom[0]->gpu_data();
  if (bottom[0] == top[0]) {  // keep the input for the scale gradient
    GpuCopy(n, x, input_.mutable_gpu_data());
    x = input_.gpu_data();
  }
  const float* scale = bottom.size() > 1 ? bottom[1]->gpu_data() : blobs_[0]->gpu_data();
  const float* bias = bias_index_ >= 0 ? blobs_[bias_index_]->gpu_data() : nullptr;
  LaunchIndexed(n, ScaleKernel<uint32_t>, ScaleKernel<int64_t>, n, broadcast_.dim, broadcast_.inner,
                x, scale, bias, top[0]->mutable_gpu_data());
}

void ScaleLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                             const BlobVec& bottom) {
  if (fused_into_ != nullptr) return BackwardFused(propagate_down);
  const AxisBroadcast& b = broadcast_;
  const float* dy = top[0]->gpu_diff();
  if (bias_index_ >= 0 && param_propagate_down(bias_index_)) {
    GpuChannelSum(b.outer, b.dim, b.inner, dy, nullptr, true,
                  blobs_[bias_index_]->mutable_gpu_diff());
  }
  const bool learned_scale = bottom.size() == 1;
  if (learned_scale ? param_propagate_down(0) : propagate_down[1]) {
    const float* x = bottom[0] == top[0] ? input_.gpu_data() : bottom[0]->gpu_data();
    float* ds = learned_scale ? blobs_[0]->mutable_gpu_diff() : bottom[1]->mutable_gpu_diff();
    GpuChannelSum(b.outer, b.dim, b.inner, dy, x, learned_scale, ds);
  }
  if (propagate_down[0] && top[0]->count() > 0) {
    const float* scale = learned_scale ? blobs_[0]->gpu_data() : bottom[1]->gpu_data();
    // dx may alias dy: element-wise, each read before its write.
    LaunchIndexed(top[0]->count(), ScaleKernel<uint32_t>, ScaleKernel<int64_t>, top[0]->count(),
                  b.dim, b.inner, dy, scale, static_cast<const float*>(nullptr),
                  bottom[0]->mutable_gpu_diff());
  }
}

}  // namespace pstrain
