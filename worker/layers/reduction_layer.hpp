// Reduction: reduces reduction_param.axis (default 0) and every axis after it
// to one value per leading index: SUM (default), ASUM (sum of |x|), SUMSQ
// (sum of x^2) or MEAN, times coeff (default 1). Top shape: the bottom's
// first `axis` dimensions ({} for axis 0). dx = coeff * dy times 1, sign(x),
// 2x or 1/count respectively.
#pragma once

#include <vector>

#include "worker/layer.hpp"

namespace pstrain {

class ReductionLayer : public Layer {
 public:
  using Layer::Layer;

  const char* type() const override { return "Reduction"; }
#ifdef PSTRAIN_HAVE_CUDA
  bool HasGpuPath() const override { return true; }
#endif
  Status Reshape(const BlobVec& bottom, const BlobVec& top) override;
  int ExactNumBottomBlobs() const override { return 1; }
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
  int64_t num_ = 0;  // leading positions (one top value each)
  int64_t dim_ = 0;  // values reduced into each
};

}  // namespace pstrain
