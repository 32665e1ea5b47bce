// Silence on the GPU: zero gradients written on the device.
#include "worker/layers/layer_kernels.cuh"
#include "worker/layers/silence_layer.hpp"

namespace pstrain {

void SilenceLayer::ForwardGpu(const BlobVec&, const BlobVec&) {}

void SilenceLayer::BackwardGpu(const BlobVec&, const std::vector<bool>& propagate_down,
                               const BlobVec& bottom) {
  for (size_t i = 0; i < bottom.size(); ++i) {
    if (propagate_down[i] && bottom[i]->count() > 0) {
      GpuSet(bottom[i]->count(), 0.f, bottom[i]->mutable_gpu_diff());
    }
  }
}

}  // namespace pstrain
