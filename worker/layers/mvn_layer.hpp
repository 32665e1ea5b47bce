// MVN: mean-variance normalisation, Caffe's semantics. The bottom (at most 4
// axes, read as Caffe's num x channels x height x width) is split into groups:
// one per (n, c), or one per n with mvn_param.across_channels. Per group:
//   y = x - mean(x);  with normalize_variance (default): y /= s, where
//   s = sqrt(mean((x - mean)^2)) + eps (eps default 1e-9, added to the root).
// Top: the bottom's legacy 4-D shape (N, C, H, W), as Caffe. Gradient
// (Caffe's formulas: exact for eps = 0, Caffe's approximation otherwise):
//   dx = (dy - mean(dy) - y * mean(dy * y)) / s, or dx = dy - mean(dy).
// In place is safe: group sums are taken before any value is written.
#pragma once

#include <vector>

#include "worker/layer.hpp"

namespace pstrain {

class MVNLayer : public Layer {
 public:
  using Layer::Layer;

  const char* type() const override { return "MVN"; }
#ifdef PSTRAIN_HAVE_CUDA
  bool HasGpuPath() const override { return true; }
#endif
  Status Reshape(const BlobVec& bottom, const BlobVec& top) override;
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
  int64_t groups_ = 0;  // groups normalised separately
  int64_t dim_ = 0;     // values a group
  Blob mean_;           // per group: mean(x) of the last forward
  Blob scale_;          // per group: s (1 without normalize_variance)
  Blob sums_;           // per group, backward: mean(dy), then mean(dy * y)
};

}  // namespace pstrain
