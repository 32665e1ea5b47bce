// EuclideanLoss: loss = 1/(2N) * sum_i (a_i - b_i)^2 over bottoms a (0) and b
// (1), N = a.shape(0). Both bottoms need the same first dimension and the same
// count(1). Both take gradients: da = w/N (a - b), db = -w/N (a - b) with w
// the loss weight in top[0]->cpu_diff()[0].
#pragma once

#include <vector>

#include "worker/layers/loss_layer.hpp"

namespace pstrain {

class EuclideanLossLayer : public LossLayer {
 public:
  using LossLayer::LossLayer;

  const char* type() const override { return "EuclideanLoss"; }
#ifdef PSTRAIN_HAVE_CUDA
  bool HasGpuPath() const override { return true; }
#endif
  bool AllowForceBackward(int) const override { return true; }

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
  Blob diff_;  // a - b from the last Forward
};

}  // namespace pstrain
