// Scale: Caffe's broadcast multiplication top = bottom 0 * s (+ b).
//
// s is either a learned blob (one bottom; shape = bottom 0's axes
// [axis, axis + num_axes), num_axes -1 meaning to the end; filler default
// constant 1) or bottom 1 (two bottoms; its shape must equal bottom 0's axes
// from `axis`). A scalar s ignores axis. With bias_term a learned bias b of
// the same shape as s follows (bias_filler, default constant 0).
// Blobs: [s] [b] with one bottom, [b] with two. In-place is supported.
// After a BatchNorm, in place on its top, the BatchNorm may take this layer
// over (batch_norm_layer.hpp, "Fused with the Scale after it"): Forward then
// does nothing and Backward runs the pair's fused backward.
#pragma once

#include <vector>

#include "worker/layer.hpp"
#include "worker/layers/bias_layer.hpp"
#include "worker/layers/fused_scale_owner.hpp"

namespace pstrain {

class ScaleLayer : public Layer {
 public:
  explicit ScaleLayer(const caffe::LayerParameter& param) : Layer(param) {}

  Status LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  Status Reshape(const BlobVec& bottom, const BlobVec& top) override;
  const char* type() const override { return "Scale"; }
#ifdef PSTRAIN_HAVE_CUDA
  bool HasGpuPath() const override { return true; }
#endif
  int MinBottomBlobs() const override { return 1; }
  int MaxBottomBlobs() const override { return 2; }
  int ExactNumTopBlobs() const override { return 1; }

  // True when this layer, set up on `bottom` (N x C x ...), multiplies it by
  // its own learned [C] scale along axis 1: what a BatchNorm can take over.
  bool ScalesChannelsOf(const Blob& bottom) const;
  // From now on `owner` (the BatchNorm before it) runs this layer's work
  // (see above).
  void FuseInto(FusedScaleOwner* owner) {
    fused_into_ = owner;
    set_fused(true);
  }
  FusedScaleOwner* fused_into() const { return fused_into_; }
  // The learned bias b, or null without bias_term.
  Blob* bias() const { return bias_index_ >= 0 ? blobs_[bias_index_].get() : nullptr; }

 protected:
  void ForwardReference(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardReference(const BlobVec& top, const std::vector<bool>& propagate_down,
                         const BlobVec& bottom) override;
  void ForwardFast(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardFast(const BlobVec& top, const std::vector<bool>& propagate_down,
                    const BlobVec& bottom) override;
#ifdef PSTRAIN_HAVE_CUDA
  void ForwardGpu(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom) override;
#endif

 private:
  // Fused: the BatchNorm's fused backward, with this layer's wants.
  void BackwardFused(const std::vector<bool>& propagate_down);

  AxisBroadcast broadcast_;
  int bias_index_ = -1;  // index of b in blobs_, -1 without bias_term
  Blob input_;           // bottom 0's data when in place (for the scale gradient)
  FusedScaleOwner* fused_into_ = nullptr;
};

}  // namespace pstrain
