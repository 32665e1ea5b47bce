// Split: copies one bottom to several tops, Caffe's semantics. The Net inserts
// it where one top feeds several bottoms. Every top shares the bottom's data
// (Forward moves nothing) but has its own diff; Backward writes the sum of
// the tops' diffs into the bottom diff. Not in place.
#pragma once

#include <vector>

#include "worker/layer.hpp"

namespace pstrain {

class SplitLayer : public Layer {
 public:
  explicit SplitLayer(const caffe::LayerParameter& param) : Layer(param) {}

  Status Reshape(const BlobVec& bottom, const BlobVec& top) override;
  const char* type() const override { return "Split"; }
#ifdef PSTRAIN_HAVE_CUDA
  bool HasGpuPath() const override { return true; }
#endif
  int ExactNumBottomBlobs() const override { return 1; }
  int MinTopBlobs() const override { return 1; }

 protected:
  void ForwardReference(const BlobVec& /*bottom*/, const BlobVec& /*top*/) override {}
  void BackwardReference(const BlobVec& top, const std::vector<bool>& propagate_down,
                         const BlobVec& bottom) override;
#ifdef PSTRAIN_HAVE_CUDA
  void ForwardGpu(const BlobVec& /*bottom*/, const BlobVec& /*top*/) override {}
  void BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom) override;
#endif
};

}  // namespace pstrain
