// Reshape: gives the bottom a new shape without moving data, Caffe's
// semantics. `shape` replaces the bottom axes [axis, axis + num_axes)
// (num_axes -1: through the last axis); in it, 0 copies the bottom dimension
// at that position and one -1 is inferred from the count. The top shares the
// bottom's data and diff. Not in place.
#pragma once

#include <vector>

#include "worker/layer.hpp"

namespace pstrain {

class ReshapeLayer : public Layer {
 public:
  explicit ReshapeLayer(const caffe::LayerParameter& param) : Layer(param) {}

  Status LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  Status Reshape(const BlobVec& bottom, const BlobVec& top) override;
  const char* type() const override { return "Reshape"; }
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

 private:
  std::vector<int> copy_axes_;  // positions in `shape` holding 0
  int inferred_axis_ = -1;      // position in `shape` holding -1, or -1
  int64_t constant_count_ = 1;  // product of the other dims of `shape`
};

}  // namespace pstrain
