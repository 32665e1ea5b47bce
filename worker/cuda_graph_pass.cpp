// CudaGraphPass: see cuda_graph_pass.hpp.
#include "worker/cuda_graph_pass.hpp"

#ifdef PSTRAIN_HAVE_CUDA
#include <cuda_runtime.h>

#include "common/cuda/cuda_check.hpp"
#include "common/cuda/device_allocator.hpp"
#include "common/cuda/gpu_context.hpp"
#endif

namespace pstrain {

#ifdef PSTRAIN_HAVE_CUDA

struct CudaGraphPass::Graph {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ~Graph() {
    // Destructors may run while a device failure is reported: errors are dropped.
    if (exec != nullptr && cudaGraphExecDestroy(exec) != cudaSuccess) (void)cudaGetLastError();
    if (graph != nullptr && cudaGraphDestroy(graph) != cudaSuccess) (void)cudaGetLastError();
  }
};

namespace {

std::string CudaError(const char* call, cudaError_t err) { return CudaStatus(err, call).message(); }

}  // namespace

CudaGraphPass::CudaGraphPass() = default;
CudaGraphPass::~CudaGraphPass() = default;

// Captures `pass` into graph_ and instantiates it; on failure sets
// fallback_reason_, clears the error CUDA left and holds no graph.
Status CudaGraphPass::Capture(const std::function<void()>& pass) {
  cudaStream_t stream = GpuContext::ForThisThread().stream();
  auto graph = std::make_unique<Graph>();
  cudaError_t err = cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    fallback_reason_ = CudaError("cudaStreamBeginCapture", err);
    return Status::Ok();
  }
  pass();
  err = cudaStreamEndCapture(stream, &graph->graph);
  if (err != cudaSuccess) (void)cudaGetLastError();
  // Workspaces the pass freed are cached with events recorded in the capture.
  PSTRAIN_RETURN_IF_ERROR(RecordCapturedFrees());
  if (err != cudaSuccess) {
    fallback_reason_ = CudaError("cudaStreamEndCapture", err);
    return Status::Ok();
  }
  err = cudaGraphInstantiate(&graph->exec, graph->graph, 0);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    graph->exec = nullptr;
    fallback_reason_ = CudaError("cudaGraphInstantiate", err);
    return Status::Ok();
  }
  graph_ = std::move(graph);
  captured_ = true;
  return Status::Ok();
}

Status CudaGraphPass::Run(const std::function<void()>& pass) {
  if (!tried_) {
    tried_ = true;
    PSTRAIN_RETURN_IF_ERROR(Capture(pass));
  }
  if (!captured_) {  // the captured work never ran: run the pass itself
    pass();
    ++eager_runs_;
    return Status::Ok();
  }
  const cudaError_t err = cudaGraphLaunch(graph_->exec, GpuContext::ForThisThread().stream());
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return CudaStatus(err, "launching the captured CUDA graph (cudaGraphLaunch)");
  }
  ++launches_;
  return Status::Ok();
}

#else  // !PSTRAIN_HAVE_CUDA

struct CudaGraphPass::Graph {};

CudaGraphPass::CudaGraphPass() = default;
CudaGraphPass::~CudaGraphPass() = default;

Status CudaGraphPass::Capture(const std::function<void()>&) { return Status::Ok(); }

Status CudaGraphPass::Run(const std::function<void()>&) {
  return Status::FailedPrecondition("CUDA graphs need a CUDA build");
}

#endif  // PSTRAIN_HAVE_CUDA

}  // namespace pstrain
