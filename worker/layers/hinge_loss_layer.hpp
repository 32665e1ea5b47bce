// HingeLoss: one-versus-all hinge loss of N x K scores (bottom 0; K is
// count(1)) against N class labels (bottom 1, stored as floats). With
// t_nk = 1 for k = label_n and -1 otherwise, m_nk = max(0, 1 - t_nk x_nk):
//   L1 (hinge_loss_param.norm default): loss = sum m_nk / N
//   L2: loss = sum m_nk^2 / N
// The gradient flows to the scores only: -t_nk [m_nk > 0] w/N for L1,
// -2 t_nk m_nk w/N for L2 (w the loss weight).
// A label outside [0, K) is broken input: the loss is NaN, the gradient zero,
// and RuntimeStatus() names the first such label (Caffe reads past the row).
#pragma once

#include <vector>

#include "worker/layers/loss_layer.hpp"

namespace pstrain {

class HingeLossLayer : public LossLayer {
 public:
  using LossLayer::LossLayer;

  const char* type() const override { return "HingeLoss"; }
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
  // Checks the labels (host); sets last_error_ and returns false on a broken one.
  bool CheckLabels(const Blob& labels);

  int num_ = 0;
  int dim_ = 0;
  Blob margins_;  // m_nk of the last forward
  Status last_error_;
};

}  // namespace pstrain
