// ContrastiveLoss (Hadsell, Chopra and LeCun 2006), Caffe's siamese loss.
//
// Bottoms: a and b (N x C x ..., the same shape), and y (N similarity labels,
// stored as floats; a label that truncates to a non-zero int means similar).
// With d_n = ||a_n - b_n||:
//   loss = 1/(2N) sum_n [ similar ? d_n^2 : max(margin - d_n, 0)^2 ]
// or, with contrastive_loss_param.legacy_version, max(margin - d_n^2, 0) for
// dissimilar pairs (margin default 1). Gradients flow to a and b (b gets the
// negative of a's); y takes none. As in Caffe, the non-legacy dissimilar
// gradient divides by d_n + 1e-4 so that coinciding pairs stay finite.
#pragma once

#include <vector>

#include "worker/layers/loss_layer.hpp"

namespace pstrain {

class ContrastiveLossLayer : public LossLayer {
 public:
  using LossLayer::LossLayer;

  const char* type() const override { return "ContrastiveLoss"; }
#ifdef PSTRAIN_HAVE_CUDA
  bool HasGpuPath() const override { return true; }
#endif
  int ExactNumBottomBlobs() const override { return 3; }
  bool AllowForceBackward(int bottom_index) const override { return bottom_index != 2; }

  Status Reshape(const BlobVec& bottom, const BlobVec& top) override;

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
  // The loss from dist_sq_ and the labels (host), shared by both paths.
  float LossFromDistances(const float* labels) const;

  int num_ = 0;
  int64_t channels_ = 0;  // count(1) of a
  Blob diff_;             // a - b
  Blob dist_sq_;          // N squared distances
};

}  // namespace pstrain
