#include "worker/layers/silence_layer.hpp"

#include <algorithm>

#include "worker/layer_registry.hpp"

namespace pstrain {

Status SilenceLayer::Reshape(const BlobVec&, const BlobVec&) { return Status::Ok(); }

void SilenceLayer::ForwardReference(const BlobVec&, const BlobVec&) {}

void SilenceLayer::BackwardReference(const BlobVec&, const std::vector<bool>& propagate_down,
                                     const BlobVec& bottom) {
  for (size_t i = 0; i < bottom.size(); ++i) {
    if (!propagate_down[i]) continue;
    float* dx = bottom[i]->mutable_cpu_diff();
    std::fill(dx, dx + bottom[i]->count(), 0.f);
  }
}

PSTRAIN_REGISTER_LAYER("Silence", SilenceLayer);

}  // namespace pstrain
