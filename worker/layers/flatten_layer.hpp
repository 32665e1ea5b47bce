// Flatten: folds axes [axis, end_axis] of the bottom into one, Caffe's
// semantics. The top shares the bottom's data and diff, so Forward and
// Backward move nothing. Not in place.
#pragma once

#include <vector>

#include "worker/layer.hpp"

namespace pstrain {

class FlattenLayer : public Layer {
 public:
  explicit FlattenLayer(const caffe::LayerParameter& param) : Layer(param) {}

  Status Reshape(const BlobVec& bottom, const BlobVec& top) override;
  const char* type() const override { return "Flatten"; }
#ifdef PSTRAIN_HAVE_CUDA
  bool HasGpuPath() const override { return true; }
#endif
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }

 protected:
  void ForwardReference(const BlobVec& /*bottom*/, const BlobVec& /*top*/) override {}
  void BackwardReference(const BlobVec& /*top*/, const std::vector<bool>& /*propagate_down*/,
                         const BlobVec& /*bottom*/) override {}
#ifdef PSTRAIN_HAVE_CUDA
  // The top shares the bottom's data and diff: nothing to compute.
  void ForwardGpu(const BlobVec& /*bottom*/, const BlobVec& /*top*/) override {}
  void BackwardGpu(const BlobVec& /*top*/, const std::vector<bool>& /*propagate_down*/,
                   const BlobVec& /*bottom*/) override {}
#endif
};

}  // namespace pstrain
