#include "worker/layers/neuron_layer.hpp"

namespace pstrain {

Status NeuronLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  in_place_ = top[0] == bottom[0];
  if (!in_place_) top[0]->ReshapeLike(*bottom[0]);
  if (in_place_ && BackwardReadsBottom()) kept_bottom_.ReshapeLike(*bottom[0]);
  return Status::Ok();
}

void NeuronLayer::KeepBottom(const BlobVec& bottom, const BlobVec& top) {
  if (top[0] != bottom[0] || !BackwardReadsBottom()) return;
  kept_bottom_.CopyFrom(*bottom[0], /*copy_diff=*/false, /*reshape=*/true);
}

const Blob& NeuronLayer::BackwardInput(const BlobVec& bottom) const {
  return in_place_ && BackwardReadsBottom() ? kept_bottom_ : *bottom[0];
}

}  // namespace pstrain
