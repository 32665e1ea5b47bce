// FusedScaleOwner: what a Scale layer taken over by the layer before it
// (BatchNorm: batch_norm_layer.hpp, "Fused with the Scale after it") calls
// on that layer. The Scale sees its owner only through this, so
// scale_layer.* never includes batch_norm_layer.hpp; batch_norm_layer.*
// includes scale_layer.hpp (the include goes one way).
#pragma once

namespace pstrain {

class FusedScaleOwner {
 public:
  // The pair's backward, run from the Scale layer's Backward: adds the scale
  // gradient (`scale_diff`) and the bias gradient (`bias_diff`, when the
  // Scale has a bias) into the Scale's blobs, and writes the owner's bottom
  // diff when `bottom_diff` (whether the Scale's bottom, the owner's top,
  // wants a gradient: in a Net exactly when the owner's bottom does).
  virtual void BackwardFused(bool scale_diff, bool bias_diff, bool bottom_diff) = 0;

 protected:
  ~FusedScaleOwner() = default;
};

}  // namespace pstrain
