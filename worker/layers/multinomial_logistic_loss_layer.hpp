// MultinomialLogisticLoss: -1/N sum_n log(max(p_n,label_n, 1e-20)) of N x K
// probabilities (bottom 0; K is count(1)) against N class labels (bottom 1,
// stored as floats). The gradient flows to the probabilities only:
// -w / (N max(p, 1e-20)) at each sample's label, 0 elsewhere.
// A label outside [0, K) is broken input: the loss is NaN, the gradient zero,
// and RuntimeStatus() names the first such label.
#pragma once

#include <vector>

#include "worker/layers/loss_layer.hpp"

namespace pstrain {

class MultinomialLogisticLossLayer : public LossLayer {
 public:
  using LossLayer::LossLayer;

  const char* type() const override { return "MultinomialLogisticLoss"; }
#ifdef PSTRAIN_HAVE_CUDA
  bool HasGpuPath() const override { return true; }
#endif
  Status Reshape(const BlobVec& bottom, const BlobVec& top) override;
  Status RuntimeStatus() const override { return last_error_; }

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
  bool CheckLabels(const Blob& labels);  // sets last_error_ on a broken label

  int num_ = 0;
  int dim_ = 0;
  Blob terms_;  // GPU path: the N loss terms
  Status last_error_;
};

}  // namespace pstrain
