// Input layer ("Input"): tops whose values the caller writes (deploy nets,
// tests). input_param.shape: none (the caller shapes the tops), one for every
// top, or one per top. No computation, no gradient.
#pragma once

#include "worker/layer.hpp"

namespace pstrain {

class InputLayer : public Layer {
 public:
  explicit InputLayer(const caffe::LayerParameter& param) : Layer(param) {}

  Status LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  // Leaves the tops as they are: shapes are set once, at setup.
  Status Reshape(const BlobVec&, const BlobVec&) override { return Status::Ok(); }
  const char* type() const override { return "Input"; }
  bool IsDataSource() const override { return true; }
  int ExactNumBottomBlobs() const override { return 0; }
  int MinTopBlobs() const override { return 1; }

 protected:
  void ForwardReference(const BlobVec&, const BlobVec&) override {}
  void BackwardReference(const BlobVec&, const std::vector<bool>&, const BlobVec&) override {}
};

}  // namespace pstrain
