// CudaGraphPass: a GPU pass (a net's forward and backward, say) captured once
// into a CUDA graph and launched again as one unit, so that the host does not
// launch its hundreds of kernels one by one every iteration.
//
// The first Run captures `pass` on this thread's GpuContext stream
// (cudaStreamCaptureModeRelaxed: the caching allocator may still call
// cudaMalloc), instantiates the graph and launches it; later Runs launch the
// graph without calling `pass`. When the capture ends invalid or the graph
// cannot be instantiated (cudaStreamEndCapture, cudaGraphInstantiate fail),
// the pass runs eagerly instead, now and on every later Run, and
// fallback_reason() names the CUDA call and its error: the caller logs it.
// A call inside the pass that CUDA refuses while capturing (a synchronous
// cudaMemcpy, a stream synchronisation) fails where it is made, and the
// engine's checks abort there with that call's error: such a pass is not
// capturable, and the eager path is the one to use.
//
// REQUIRES of `pass`, since its host code runs only once: the same work every
// call, on the same memory; everything it allocates lazily already allocated
// (run it eagerly once first: first-use cuDNN measurements synchronise); no
// host read of a device result inside it. Not thread-safe; the thread that
// made it runs it. Without CUDA (or in builds without CUDA) Run is
// FailedPrecondition.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "common/status.hpp"

namespace pstrain {

class CudaGraphPass {
 public:
  CudaGraphPass();
  ~CudaGraphPass();
  CudaGraphPass(const CudaGraphPass&) = delete;
  CudaGraphPass& operator=(const CudaGraphPass&) = delete;

  // Queues one pass (the graph, or `pass` itself after a fallback) on the
  // stream; does not wait for it. An error of a CUDA call outside the
  // capture (launching the graph) is returned, naming the call.
  Status Run(const std::function<void()>& pass);

  bool captured() const { return captured_; }
  int64_t launches() const { return launches_; }      // graph launches so far
  int64_t eager_runs() const { return eager_runs_; }  // passes run without the graph
  // Empty while the graph serves; else why it does not.
  const std::string& fallback_reason() const { return fallback_reason_; }

 private:
  struct Graph;
  Status Capture(const std::function<void()>& pass);

  std::unique_ptr<Graph> graph_;
  bool tried_ = false;
  bool captured_ = false;
  int64_t launches_ = 0;
  int64_t eager_runs_ = 0;
  std::string fallback_reason_;
};

}  // namespace pstrain
