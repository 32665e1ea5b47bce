// Embed: Caffe's EmbedLayer, a lookup table (an InnerProduct on one-hot inputs).
//
// Bottom: indices (any shape, integer values in [0, input_dim)). Top: the
// bottom's shape followed by num_output; top[..., :] = W[index, :] (+ b).
// Params, in Caffe's order: W [input_dim, num_output] (weight_filler), then
// b [num_output] (bias_filler) when bias_term. The bottom takes no gradient.
// An index that is not an integer in [0, input_dim) is a run-time error
// (RuntimeStatus names it); its row of the top is left at zero (+ b).
#pragma once

#include <string>
#include <vector>

#include "worker/layer.hpp"

namespace pstrain {

class EmbedLayer : public Layer {
 public:
  explicit EmbedLayer(const caffe::LayerParameter& param) : Layer(param) {}

  Status LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  Status Reshape(const BlobVec& bottom, const BlobVec& top) override;
  Status RuntimeStatus() const override { return runtime_status_; }
  const char* type() const override { return "Embed"; }
#ifdef PSTRAIN_HAVE_CUDA
  bool HasGpuPath() const override { return true; }
#endif
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
  bool AllowForceBackward(int) const override { return false; }

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
  // Checks every index of the bottom (host copy); keeps the first error.
  bool CheckIndices(const Blob& bottom);

  int input_dim_ = 0;   // K
  int num_output_ = 0;  // N
  int64_t m_ = 0;       // indices in the bottom
  bool bias_term_ = true;
  Status runtime_status_;
};

}  // namespace pstrain
