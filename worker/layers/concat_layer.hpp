// Concat: joins one or more bottoms along `axis` (or the legacy concat_dim),
// Caffe's semantics. All other axes must agree. With one bottom the top shares
// its data and diff.
#pragma once

#include <vector>

#include "worker/layer.hpp"

namespace pstrain {

class ConcatLayer : public Layer {
 public:
  explicit ConcatLayer(const caffe::LayerParameter& param) : Layer(param) {}

  Status LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  Status Reshape(const BlobVec& bottom, const BlobVec& top) override;
  const char* type() const override { return "Concat"; }
#ifdef PSTRAIN_HAVE_CUDA
  bool HasGpuPath() const override { return true; }
#endif
  int MinBottomBlobs() const override { return 1; }
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
  int axis_ = 1;             // canonical
  int64_t num_concats_ = 0;  // product of the axes before axis_
  int64_t inner_size_ = 0;   // product of the axes after axis_
};

}  // namespace pstrain
