// ArgMax: the top_k (argmax_param.top_k, default 1) largest values of each
// instance and where they are, Caffe's semantics and shapes.
//  - Without argmax_param.axis: per index of axis 0, over the flattened rest
//    (count(1) values). Top: (N, 1, top_k) holding the indices, or (N, 2,
//    top_k) with out_max_val: the top_k indices, then the top_k values.
//  - With axis (negative counts from the end): along that axis, per position
//    of the others. Top: the bottom's shape with that axis top_k long, holding
//    the indices, or the values with out_max_val.
// Ranking (Caffe's std::greater on (value, index) pairs): larger values
// first; among equal values the larger index first. Indices are stored as
// floats. No gradient: Backward leaves the bottom alone.
#pragma once

#include <vector>

#include "worker/layer.hpp"

namespace pstrain {

class ArgMaxLayer : public Layer {
 public:
  using Layer::Layer;

  const char* type() const override { return "ArgMax"; }
#ifdef PSTRAIN_HAVE_CUDA
  bool HasGpuPath() const override { return true; }
#endif
  Status Reshape(const BlobVec& bottom, const BlobVec& top) override;
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
  bool AllowForceBackward(int) const override { return false; }

 protected:
  void ForwardReference(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardReference(const BlobVec&, const std::vector<bool>&, const BlobVec&) override {}
#ifdef PSTRAIN_HAVE_CUDA
  void ForwardGpu(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardGpu(const BlobVec&, const std::vector<bool>&, const BlobVec&) override {}
#endif

 private:
  // Instance i ranks the dim_ values x[(i / stride_ * dim_ + j) * stride_ +
  // i % stride_] for j < dim_; num_ instances.
  int64_t num_ = 0;
  int64_t dim_ = 0;
  int64_t stride_ = 1;
  int top_k_ = 1;
};

}  // namespace pstrain
