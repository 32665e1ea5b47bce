// Scale: Caffe's broadcast multiplication top = bottom 0 * s (+ b).
//
// s is either a learned blob (one bottom; shape = bottom 0's axes
// [axis, axis + num_axes), num_axes -1 meaning to the end; filler default
// constant 1) or bottom 1 (two bottoms; its shape must equal bottom 0's axes
// from `axis`). A scalar s ignores axis. With bias_term a learned bias b of
// the same shape as s follows (bias_filler, default constant 0).
// Blobs: [s] [b] with one bottom, [b] with two. In-place is supported.
#pragma once

#include <vector>

#include "worker/layer.hpp"
#include "worker/layers/bias_layer.hpp"

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

 protected:
  void ForwardReference(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardReference(const BlobVec& top, const std::vector<bool>& propagate_down,
                         const BlobVec& bottom) override;
#ifdef PSTRAIN_HAVE_CUDA
  void ForwardGpu(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom) override;
#endif

 private:
  AxisBroadcast broadcast_;
  int bias_index_ = -1;  // index of b in blobs_, -1 without bias_term
  Blob input_;           // bottom 0's data when in place (for the scale gradient)
};

}  // namespace pstrain
