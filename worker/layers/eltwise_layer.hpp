// Eltwise: element-wise PROD, SUM (with one coeff per bottom) or MAX of two
// or more bottoms of the same shape, Caffe's semantics.
//
// MAX keeps the index of the winning bottom per element for Backward (ties
// between bottoms 0 and 1 go to 1; later bottoms must be strictly larger).
// PROD's gradient with stable_prod_grad (default) is the product of the other
// bottoms; without it, top / bottom (undefined where a bottom is 0).
//
// Under the fast engine a SUM followed by a ReLU in place on its top (ResNet's
// residual sums) runs as one step (Net::FuseLayers): Forward writes the ReLU's
// output, Backward gates the gradient by it (Caffe's in-place ReLU backward)
// before scaling it into each bottom's diff; the ReLU's Forward and Backward
// do nothing (Layer::fused()).
#pragma once

#include <vector>

#include "worker/layer.hpp"

namespace pstrain {

class EltwiseLayer : public Layer {
 public:
  explicit EltwiseLayer(const caffe::LayerParameter& param) : Layer(param) {}

  Status LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  Status Reshape(const BlobVec& bottom, const BlobVec& top) override;
  const char* type() const override { return "Eltwise"; }
#ifdef PSTRAIN_HAVE_CUDA
  bool HasGpuPath() const override { return true; }
#endif
  int MinBottomBlobs() const override { return 2; }
  int ExactNumTopBlobs() const override { return 1; }

  // True for SUM: what a ReLU after it can be fused into.
  bool Sums() const { return op_ == caffe::EltwiseParameter::SUM; }
  // Net::FuseLayers: a SUM under the fast CPU engine takes over a ReLU in
  // place on its top (on the GPU it would save one element-wise kernel's
  // traffic only); nothing else.
  bool TakeOver(Layer& next, Blob* bottom, Blob* top) override;

 protected:
  void ForwardReference(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardReference(const BlobVec& top, const std::vector<bool>& propagate_down,
                         const BlobVec& bottom) override;
  void ForwardFast(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardFast(const BlobVec& top, const std::vector<bool>& propagate_down,
                    const BlobVec& bottom) override;
#ifdef PSTRAIN_HAVE_CUDA
  void ForwardGpu(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom) override;
#endif

 private:
  caffe::EltwiseParameter::EltwiseOp op_ = caffe::EltwiseParameter::SUM;
  std::vector<float> coeffs_;
  bool stable_prod_grad_ = true;
  std::vector<int> max_index_;  // MAX: winning bottom per element
  bool fused_relu_ = false;
  float relu_slope_ = 0.f;
#ifdef PSTRAIN_HAVE_CUDA
  Blob max_index_gpu_;  // MAX on the GPU: winning bottom per element, as float
#endif
};

}  // namespace pstrain
