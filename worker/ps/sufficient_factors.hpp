// FactorCapture: the InnerProduct weights a worker pushes as sufficient
// factors (common/ps/sufficient_factors.hpp) instead of their gradients, and
// the factors themselves, stacked over the iteration's iter_size passes.
//
// A weight qualifies when it belongs to an InnerProduct layer alone (not
// shared with another layer) and its factors, as PsClient::PushFactors sends
// them to the shards holding its chunks, are fewer bytes than its gradient
// (both in the push's encoding, float32 or 16-bit):
//   sum over those shards of samples x (rows its chunks touch + cols) < rows x cols
// with samples = batch x iter_size (one shard: batch x iter_size x (out + in)
// < out x in). The bias stays dense. Caffe sums a weight's gradient over the
// iter_size passes; the factors of pass i are rows [i*batch, (i+1)*batch) of
// the stack, so left^T right is that same sum.
//
// After every backward pass of the training net (the net's after_backward
// hook), Captured copies each qualifying layer's top diff and bottom data
// into the stack; StartIteration empties it. On the GPU engine those reads
// copy the two blobs back from the device (SyncedMemory: one wait on the
// compute stream per factored layer and pass, which the dense path's
// overlapped copies do not have). Used by the training loop's thread only.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/ps/key_placement.hpp"
#include "worker/net.hpp"
#include "worker/ps/ps_client.hpp"

namespace pstrain {

class FactorCapture {
 public:
  // The qualifying weights of `net`, whose PS parameter of learnable param i
  // is ps_param_of_learnable[i] (-1: not on the servers). Null when none
  // qualifies. `net` must outlive the capture. dtype: the factors' encoding
  // on the wire (FactorDtype of the push compression; IsFactorDtype), which
  // the bytes compared and summary() count, the dense gradient's in it too.
  // fewer_bytes false: every InnerProduct weight alone in its layer
  // qualifies, whatever the bytes.
  static std::unique_ptr<FactorCapture> Create(const Net& net,
                                               const std::vector<int>& ps_param_of_learnable,
                                               int iter_size, const KeyPlacement& placement,
                                               pstrain::DataType dtype, bool fewer_bytes = true);
  ~FactorCapture();
  FactorCapture(const FactorCapture&) = delete;
  FactorCapture& operator=(const FactorCapture&) = delete;

  // The qualifying weights' layers stop computing the dense weight gradient
  // (Layer::set_param_propagate_down(0, false)): it is never pushed, and its
  // GEMM costs as much as the layer's forward. Their bias and bottom diffs,
  // and the top diff the capture reads, are computed as before; the weight's
  // diff stays as ClearParamDiffs left it (zero). Undone when the capture is
  // destroyed. REQUIRES: `net` is the net Create saw.
  void SkipDenseGradients(Net* net);

  // A new iteration: the stacks are emptied.
  void StartIteration();
  // Layer `layer`'s backward has run (every pass): stacks its factors if it
  // owns a qualifying weight.
  void Captured(int layer);
  // The factors of PS parameter `param` stacked so far; samples == 0 when
  // `param` does not qualify (push its diff).
  GradientFactors factors(int param) const;
  // The qualifying weights: PS parameter, shape rows x cols, and the samples
  // of one iteration (batch x iter_size).
  struct WeightShape {
    int param = 0;
    int64_t rows = 0;
    int64_t cols = 0;
    int64_t samples = 0;
  };
  std::vector<WeightShape> shapes() const;
  // "ip1 (784 -> 1024): 57856 bytes instead of 3211264", one per weight.
  const std::vector<std::string>& summary() const { return summary_; }

 private:
  struct Weight {
    int param = 0;  // PS parameter
    int layer = 0;
    const Blob* bottom = nullptr;
    const Blob* top = nullptr;
    bool transpose = false;
    int64_t rows = 0;  // the weight's shape: rows x cols
    int64_t cols = 0;
    int64_t iteration_samples = 0;  // batch x iter_size
    int64_t samples = 0;       // stacked so far
    std::vector<float> left;   // samples x rows
    std::vector<float> right;  // samples x cols
  };
  FactorCapture() = default;

  const Net* net_ = nullptr;
  Net* skipping_ = nullptr;  // SkipDenseGradients's net, restored by the destructor
  std::vector<Weight> weights_;
  std::vector<int> weight_of_layer_;  // layer -> weights_ index, or -1
  std::vector<int> weight_of_param_;  // PS param -> weights_ index, or -1
  std::vector<std::string> summary_;
};

}  // namespace pstrain
