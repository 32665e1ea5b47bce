// DummyData layer ("DummyData"): tops filled by fillers (Caffe's semantics).
//
// dummy_data_param: shape (once, or once per top) or the legacy num /
// channels / height / width (each once, or once per top; not together with
// shape); data_filler: none (constant 0), one for every top, or one per top.
// Tops with a constant filler are filled once at setup; the others are
// refilled on every Forward. Random fillers draw from an Rng seeded from the
// net seed and the layer name. No gradient.
#pragma once

#include <vector>

#include "worker/layer.hpp"

namespace pstrain {

class DummyDataLayer : public Layer {
 public:
  explicit DummyDataLayer(const caffe::LayerParameter& param) : Layer(param), rng_(0) {}

  Status LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  // Leaves the tops as they are: shapes are set once, at setup.
  Status Reshape(const BlobVec&, const BlobVec&) override { return Status::Ok(); }
  const char* type() const override { return "DummyData"; }
  bool IsDataSource() const override { return true; }
  int ExactNumBottomBlobs() const override { return 0; }
  int MinTopBlobs() const override { return 1; }

 protected:
  void ForwardReference(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardReference(const BlobVec&, const std::vector<bool>&, const BlobVec&) override {}

 private:
  const caffe::FillerParameter& FillerOf(int top_index) const;

  std::vector<caffe::FillerParameter> fillers_;  // one, or one per top
  Rng rng_;
};

}  // namespace pstrain
