// Sigmoid: y = 1 / (1 + exp(-x)). Backward uses only the top data and diff:
// dx = dy * y * (1 - y).
// One bottom, one top of the same shape; may run in place (top == bottom).
#pragma once

#include <vector>

#include "worker/layer.hpp"

namespace pstrain {

class SigmoidLayer : public Layer {
 public:
  explicit SigmoidLayer(const caffe::LayerParameter& param) : Layer(param) {}

  Status Reshape(const BlobVec& bottom, const BlobVec& top) override;
  const char* type() const override { return "Sigmoid"; }
#ifdef PSTRAIN_HAVE_CUDA
  bool HasGpuPath() const override { return true; }
#endif
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
};

}  // namespace pstrain
