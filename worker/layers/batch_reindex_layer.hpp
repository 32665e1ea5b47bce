// BatchReindex: selects samples of bottom 0 along axis 0 by the indices in
// bottom 1 (one axis, K values stored as floats, truncated to integers as in
// Caffe; repeats allowed): top (K, bottom 0's other axes), top[k] =
// bottom0[index[k]]. The gradient flows to bottom 0 only: each sample's diff
// is the sum of the top diffs of the positions that picked it (0 if none).
// An index outside [0, N) is broken input met at run time: its top sample is
// zero, it takes no gradient, and RuntimeStatus() names the first one seen by
// the last Forward (the net adds the layer's name).
#pragma once

#include <vector>

#include "worker/layer.hpp"

namespace pstrain {

class BatchReindexLayer : public Layer {
 public:
  using Layer::Layer;

  const char* type() const override { return "BatchReindex"; }
#ifdef PSTRAIN_HAVE_CUDA
  bool HasGpuPath() const override { return true; }
#endif
  Status Reshape(const BlobVec& bottom, const BlobVec& top) override;
  int ExactNumBottomBlobs() const override { return 2; }
  int ExactNumTopBlobs() const override { return 1; }
  bool AllowForceBackward(int bottom_index) const override { return bottom_index == 0; }
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
  // Checks the K indices (host copy) against num_; keeps the first bad one in
  // last_error_ (cleared when all are good).
  void CheckIndices(const Blob& indices);

  int64_t num_ = 0;    // N: samples of bottom 0
  int64_t picks_ = 0;  // K: indices in bottom 1
  int64_t inner_ = 0;  // values per sample
  Status last_error_ = Status::Ok();
};

}  // namespace pstrain
