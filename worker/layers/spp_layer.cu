// SPP on the GPU: the inner Split, Pooling, Flatten and Concat layers' own
// GPU paths.
#include "worker/layers/spp_layer.hpp"

namespace pstrain {

void SPPLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  RunForward(Engine::kGpu, bottom, top);
}

void SPPLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                           const BlobVec& bottom) {
  RunBackward(Engine::kGpu, top, propagate_down, bottom);
}

}  // namespace pstrain
