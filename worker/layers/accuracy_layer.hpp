// Accuracy: the fraction of positions whose label is among the top_k scores.
//
// Bottom 0: scores with the class axis accuracy_param.axis (default 1), of
// shape outer x C x inner. Bottom 1: one label per (outer, inner) position
// (count outer * inner), stored as floats. Positions whose label equals
// accuracy_param.ignore_label are skipped. A position is correct when fewer
// than top_k classes score >= the true class's score, other than the true
// class itself (ties count against it, as in Caffe).
// Top 0: scalar (shape {}), correct / counted, 0 when nothing is counted.
// Optional top 1: shape {C}, per-class accuracy (0 for classes never seen).
// Not a loss; takes no gradient (Backward does nothing).
//
// Labels outside [0, C) that are not the ignore label are broken input that
// Reshape cannot see: Forward skips them, writes NaN into top 0 and records
// the first one in last_error() (cleared by the next Forward with valid
// labels), rather than aborting as Caffe does.
#pragma once

#include <vector>

#include "worker/layer.hpp"

namespace pstrain {

class AccuracyLayer : public Layer {
 public:
  using Layer::Layer;

  const char* type() const override { return "Accuracy"; }
  int ExactNumBottomBlobs() const override { return 2; }
  int MinTopBlobs() const override { return 1; }
  int MaxTopBlobs() const override { return 2; }
  bool AllowForceBackward(int) const override { return false; }

  Status LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  Status Reshape(const BlobVec& bottom, const BlobVec& top) override;

  // Ok, or the first out-of-range label seen by the last Forward.
  const Status& last_error() const { return last_error_; }
  Status RuntimeStatus() const override { return last_error_; }

 protected:
  void ForwardReference(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardReference(const BlobVec&, const std::vector<bool>&, const BlobVec&) override {}

 private:
  int top_k_ = 1;
  bool has_ignore_label_ = false;
  int ignore_label_ = 0;
  int axis_ = 1;
  int64_t outer_ = 0;
  int64_t inner_ = 0;
  int channels_ = 0;
  std::vector<int64_t> class_counts_;  // per-class label counts of the last Forward
  Status last_error_;
};

}  // namespace pstrain
