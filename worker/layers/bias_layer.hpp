// Bias: Caffe's broadcast addition top = bottom 0 + b.
//
// b is either a learned blob (one bottom; shape = bottom 0's axes
// [axis, axis + num_axes), num_axes -1 meaning to the end; filler default
// constant 0) or bottom 1 (two bottoms; its shape must equal bottom 0's axes
// from `axis`). A scalar b (no axes) ignores axis. In-place is supported.
//
// The broadcast helpers below are shared with the Scale layer.
#pragma once

#include <cstdint>
#include <vector>

#include "worker/layer.hpp"

namespace pstrain {

// How an operand of shape bottom.shape[axis, axis + k) broadcasts over bottom
// (viewed as outer x dim x inner).
struct AxisBroadcast {
  int64_t outer = 1;
  int64_t dim = 1;
  int64_t inner = 1;
};

// Shape of a learned operand named `what` ("bias", "scale"): bottom's axes
// [axis, axis + num_axes), num_axes -1 meaning to the end.
Result<std::vector<int>> BroadcastOperandShape(const Blob& bottom, int axis, int num_axes,
                                               const char* what);
// Checks that `operand` matches bottom's axes from `axis` (ignored when the
// operand is a scalar) and returns the broadcast.
Result<AxisBroadcast> ResolveBroadcast(const Blob& bottom, const Blob& operand, int axis,
                                       const char* what);
// data[o, d, i] += bias[d].
void BroadcastAdd(const AxisBroadcast& b, const float* bias, float* data);
// bias_diff[d] = (accumulate ? bias_diff[d] : 0) + sum over o, i of top_diff[o, d, i].
void BroadcastSumDiff(const AxisBroadcast& b, const float* top_diff, bool accumulate,
                      float* bias_diff);

class BiasLayer : public Layer {
 public:
  explicit BiasLayer(const caffe::LayerParameter& param) : Layer(param) {}

  Status LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  Status Reshape(const BlobVec& bottom, const BlobVec& top) override;
  const char* type() const override { return "Bias"; }
#ifdef PSTRAIN_HAVE_CUDA
  bool HasGpuPath() const override { return true; }
#endif
  int MinBottomBlobs() const override { return 1; }
  int MaxBottomBlobs() const override { return 2; }
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
  AxisBroadcast broadcast_;
};

}  // namespace pstrain
