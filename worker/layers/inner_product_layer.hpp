// InnerProduct: a fully connected layer, Caffe's semantics.
//
// The bottom is viewed as an [M, K] matrix, where M is the product of the axes
// before `axis` and K the product of `axis` and the ones after it. The top has
// the bottom's leading axes and then num_output (N): top = bottom * W^T + b.
// Params (Caffe's order): weight [N, K] ([K, N] with transpose), then bias [N]
// when bias_term. K is fixed at set-up; a later bottom with another K is an error.
#pragma once

#include <vector>

#include "worker/layer.hpp"

namespace pstrain {

class InnerProductLayer : public Layer {
 public:
  explicit InnerProductLayer(const caffe::LayerParameter& param) : Layer(param) {}

  Status LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  Status Reshape(const BlobVec& bottom, const BlobVec& top) override;
  const char* type() const override { return "InnerProduct"; }
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

 private:
  int axis_ = 1;  // canonical
  int m_ = 0;     // rows: product of the axes before axis_
  int k_ = 0;     // input size
  int n_ = 0;     // num_output
  bool bias_term_ = true;
  bool transpose_ = false;
  std::vector<float> bias_multiplier_;  // M ones
};

}  // namespace pstrain
