// NeuronLayer: the base of the element-wise layers (Caffe's NeuronLayer).
//
// Each element of the top depends only on the same element of the bottom:
// one bottom, one top of the bottom's shape, and the layer may run in place
// (top == bottom). A subclass writes its formula in ForwardReference /
// BackwardReference (and ForwardGpu / BackwardGpu in its .cu file).
//
// A layer whose backward reads the bottom's data (not only the top's) says so
// with BackwardReadsBottom(); run in place, its forward path must call
// KeepBottom(bottom, top) before writing the top, and its backward reads
// BackwardInput(bottom) instead of bottom[0]: the bottom as it was before
// the forward (a copy kept on the device the forward ran on).
#pragma once

#include <vector>

#include "worker/layer.hpp"

namespace pstrain {

class NeuronLayer : public Layer {
 public:
  using Layer::Layer;

  // Shapes the top like the bottom (nothing to do in place).
  Status Reshape(const BlobVec& bottom, const BlobVec& top) override;
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }

 protected:
  virtual bool BackwardReadsBottom() const { return false; }
  // In place with BackwardReadsBottom(): copies the bottom's data before the
  // top overwrites it. Out of place: nothing.
  void KeepBottom(const BlobVec& bottom, const BlobVec& top);
  // The bottom data the backward must read: the kept copy after an in-place
  // forward, bottom[0] itself otherwise.
  const Blob& BackwardInput(const BlobVec& bottom) const;

 private:
  Blob kept_bottom_;
  bool in_place_ = false;
};

}  // namespace pstrain
