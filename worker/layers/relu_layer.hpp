// ReLU: y = max(x, 0) + negative_slope * min(x, 0) (Caffe's ReLU).
// Backward reads the bottom data, which in place is the top data; for
// negative_slope >= 0 both give the same gradient, as in Caffe.
// One bottom, one top of the same shape; may run in place (top == bottom).
// In place after a fused BatchNorm + Scale, or (fast engine) after an Eltwise
// SUM, that layer may take it over (batch_norm_layer.hpp, eltwise_layer.hpp;
// Layer::fused()): Forward and Backward then do nothing.
#pragma once

#include <vector>

#include "worker/layer.hpp"

namespace pstrain {

class ReLULayer : public Layer {
 public:
  explicit ReLULayer(const caffe::LayerParameter& param) : Layer(param) {}

  Status Reshape(const BlobVec& bottom, const BlobVec& top) override;
  const char* type() const override { return "ReLU"; }
#ifdef PSTRAIN_HAVE_CUDA
  bool HasGpuPath() const override { return true; }
#endif
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }

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
};

}  // namespace pstrain
