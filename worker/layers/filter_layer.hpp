// Filter (Caffe's FilterLayer): keeps the samples whose selector is non-zero.
//
// Bottoms: K >= 1 blobs to filter, then the selector (N values: shape (N) or
// (N, 1, ...), every axis after the first 1). Tops: K, top k holding the
// samples n of bottom k (axis 0) with selector[n] != 0, in their order; its
// other axes are bottom k's. Every bottom must have the selector's N.
//
// The tops' first axis depends on the selector's values, so it changes from
// one forward to the next: Forward recomputes the selection and reshapes the
// tops (Caffe's Reshape does this before each Forward), and ReshapesTopsInForward
// tells Net to reshape the layers after this one before their forward. As in
// Caffe, the first Reshape (at set-up, before any selector value exists) gives
// the tops all N samples; later Reshapes read the selector.
//
// Backward: bottom k's diff is top k's diff at the kept samples and 0 at the
// dropped ones. The selector takes no gradient (AllowForceBackward is false
// for it, so Net never asks; Caffe aborts when asked).
//
// GPU: the selector is read on the host (as Caffe's filter_layer.cu does),
// then one thread per top value gathers forward and one per bottom value
// scatters backward, through the kept samples' indices uploaded each forward.
#pragma once

#include <vector>

#include "worker/layer.hpp"

namespace pstrain {

class FilterLayer : public Layer {
 public:
  using Layer::Layer;

  const char* type() const override { return "Filter"; }
  Status LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  Status Reshape(const BlobVec& bottom, const BlobVec& top) override;
  int MinBottomBlobs() const override { return 2; }
  int MinTopBlobs() const override { return 1; }
  // Every bottom but the selector (known from SetUp on).
  bool AllowForceBackward(int bottom_index) const override {
    return bottom_index + 1 < num_bottoms_;
  }
  bool ReshapesTopsInForward() const override { return true; }
#ifdef PSTRAIN_HAVE_CUDA
  bool HasGpuPath() const override { return true; }
#endif
  // Samples kept by the last Forward (or Reshape), in order.
  const std::vector<int>& kept() const { return kept_; }

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
  // Reads the selector (the last bottom) into kept_ and gives every top
  // kept_.size() samples.
  void Select(const BlobVec& bottom, const BlobVec& top);
  void ShapeTops(const BlobVec& bottom, const BlobVec& top, int samples) const;

  int num_bottoms_ = 0;
  std::vector<int> kept_;
  bool first_reshape_ = true;
  // GPU path: kept_ as floats (forward's gather) and, per bottom sample, its
  // slot in the top or -1 (backward's scatter).
  Blob kept_index_;
  Blob slot_of_;
};

}  // namespace pstrain
