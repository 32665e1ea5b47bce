// Slice: splits one bottom along `axis` (or the legacy slice_dim) into the
// tops, Caffe's semantics. slice_point gives the N - 1 strictly increasing
// cut positions for N tops; without slice points the axis is split equally
// (it must divide evenly). With one top the top shares data and diff.
#pragma once

#include <vector>

#include "worker/layer.hpp"

namespace pstrain {

class SliceLayer : public Layer {
 public:
  explicit SliceLayer(const caffe::LayerParameter& param) : Layer(param) {}

  Status LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  Status Reshape(const BlobVec& bottom, const BlobVec& top) override;
  const char* type() const override { return "Slice"; }
#ifdef PSTRAIN_HAVE_CUDA
  bool HasGpuPath() const override { return true; }
#endif
  int ExactNumBottomBlobs() const override { return 1; }
  int MinTopBlobs() const override { return 1; }

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
  int axis_ = 1;            // canonical
  int64_t num_slices_ = 0;  // product of the axes before axis_
  int64_t inner_size_ = 0;  // product of the axes after axis_
};

}  // namespace pstrain
