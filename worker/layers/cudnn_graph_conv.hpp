// Convolution through cuDNN's graph (backend) API, the replacement cuDNN 9
// gives for its deprecated convolution calls (CUDA builds only: included by
// worker/layers/*.cu). conv_layer.cu uses it when PSTRAIN_CUDNN_API=graph
// (worker/layers/cudnn_conv_api.hpp); the legacy calls stay the default
// until a GPU run has checked this path against them (docs/architecture.md).
//
// One GraphConvPlans holds the execution plans of one (shape, direction): an
// operation graph of the one convolution operation, the engine configurations
// cuDNN's heuristics offer for it (mode A, the fallback list when A leaves
// nothing), filtered by their notes as the legacy path filters algorithms
// (no TF32 tensor cores or other down-converting engines, no runtime-compiled
// engines, and no non-deterministic ones unless allowed, no workspace over
// the limit), each finalized into a plan, timed on the real operands and
// ordered fastest first.
#pragma once

#include <cudnn.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.hpp"

namespace pstrain {

// One 2-D convolution as the graph sees it: packed NCHW floats, x [n, c, h, w],
// weights [k, c / group, kernel_h, kernel_w], y [n, k, out_h, out_w].
struct GraphConvShape {
  int64_t n = 0, c = 0, h = 0, w = 0, k = 0, group = 1;
  int64_t kernel_h = 0, kernel_w = 0, out_h = 0, out_w = 0;
  int64_t pad_h = 0, pad_w = 0, stride_h = 1, stride_w = 1, dilation_h = 1, dilation_w = 1;
};

// The operands per direction, in the order Execute takes them:
//   kForward         x, w        -> y   (y overwritten)
//   kBackwardData    w, dy       -> dx  (dx overwritten)
//   kBackwardFilter  x, dy       -> dw  (dw accumulated: beta 1, as Caffe adds
//                                        parameter gradients)
enum class GraphConvDirection { kForward = 0, kBackwardData = 1, kBackwardFilter = 2 };

// An owned cudnnBackendDescriptor_t (destroyed with the object).
class BackendDescriptor {
 public:
  BackendDescriptor() = default;
  ~BackendDescriptor();
  BackendDescriptor(BackendDescriptor&& other) noexcept : d_(other.d_) { other.d_ = nullptr; }
  BackendDescriptor& operator=(BackendDescriptor&& other) noexcept;
  BackendDescriptor(const BackendDescriptor&) = delete;
  BackendDescriptor& operator=(const BackendDescriptor&) = delete;

  // A new descriptor of `type`; the error names the type.
  static Result<BackendDescriptor> Create(cudnnBackendDescriptorType_t type, const char* what);
  cudnnBackendDescriptor_t get() const { return d_; }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
};

struct GraphConvOptions {
  bool deterministic = true;
  size_t workspace_limit = 0;  // bytes; plans needing more are dropped
  int64_t alignment = 16;      // bytes every operand pointer is aligned to
};

class GraphConvPlans {
 public:
  // Builds and times the plans. `a` and `b` are the direction's inputs, `out`
  // scratch memory the size of its output (written while timing), `workspace`
  // at least options.workspace_limit bytes (or null when that is 0). Fails
  // when cuDNN offers no acceptable plan, naming the step that refused.
  static Result<std::unique_ptr<GraphConvPlans>> Build(
      cudnnHandle_t handle, const GraphConvShape& shape, GraphConvDirection direction,
      const GraphConvOptions& options, const float* a, const float* b, float* out, void* workspace);
  ~GraphConvPlans();
  // Builds the operation of (shape, direction) with its tensors and
  // convolution descriptor, up to its finalization, and nothing more: the
  // part that needs no device (the graph and its plans need a handle).
  static Status CheckOperation(const GraphConvShape& shape, GraphConvDirection direction,
                               int64_t alignment);

  int size() const { return static_cast<int>(plans_.size()); }
  // Fastest first.
  size_t workspace(int plan) const { return plans_[plan].workspace; }
  // Queues plan `plan` on the handle's stream.
  Status Execute(cudnnHandle_t handle, int plan, const float* a, const float* b, float* out,
                 void* workspace) const;
  // The same in two steps: the variant pack of the operands and workspace,
  // then any plan run with it (the pack can serve several runs).
  Result<BackendDescriptor> Pack(const float* a, const float* b, float* out, void* workspace) const;
  Status Run(cudnnHandle_t handle, int plan, const BackendDescriptor& pack) const;

 private:
  struct Plan {
    BackendDescriptor config;  // the engine configuration, kept as long as its plan
    BackendDescriptor plan;
    size_t workspace = 0;
    float milliseconds = 0.f;
  };
  GraphConvPlans() = default;
  // The finalized execution plan of `config`, with its workspace size.
  static Result<Plan> MakePlan(cudnnHandle_t handle, BackendDescriptor config);

  GraphConvDirection direction_ = GraphConvDirection::kForward;
  // The graph's descriptors, kept alive as long as the plans built from them.
  std::vector<BackendDescriptor> parts_;
  std::vector<Plan> plans_;
};

}  // namespace pstrain
