// Im2col on the GPU: the selecting convolution's own GPU path (cuDNN).
#include "worker/layers/im2col_layer.hpp"

namespace pstrain {

void Im2colLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  RunForward(Engine::kGpu, bottom, top);
}

void Im2colLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                              const BlobVec& bottom) {
  RunBackward(Engine::kGpu, top, propagate_down, bottom);
}

}  // namespace pstrain
