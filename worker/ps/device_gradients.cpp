#include "worker/ps/device_gradients.hpp"

#include <deque>

#ifdef PSTRAIN_HAVE_CUDA
#include <cuda_runtime.h>

#include "common/cuda/cuda_check.hpp"
#include "common/cuda/device_allocator.hpp"
#include "common/cuda/gpu_context.hpp"
#endif

namespace pstrain {

#ifndef PSTRAIN_HAVE_CUDA

struct DeviceGradients::State {};

Result<std::unique_ptr<DeviceGradients>> DeviceGradients::Create(const std::vector<Blob*>&) {
  return Status::FailedPrecondition("the GPU engine needs a CUDA build");
}
DeviceGradients::DeviceGradients(std::unique_ptr<State> state) : state_(std::move(state)) {}
DeviceGradients::~DeviceGradients() = default;
void DeviceGradients::Start(const std::vector<int>&) { PSTRAIN_CHECK(false); }
Status DeviceGradients::Drain(bool, const PushFn&) { return Status::Ok(); }

#else  // PSTRAIN_HAVE_CUDA

struct DeviceGradients::State {
  struct Group {
    std::vector<int> ids;
    std::vector<const float*> diffs;  // the pinned buffers of ids
    cudaEvent_t copied = nullptr;     // recorded on the copy stream after the copies
  };
  std::vector<Blob*> blobs;
  std::vector<float*> pinned;           // per blob
  cudaEvent_t backward_done = nullptr;  // reused: the copies wait on it, then it is re-recorded
  std::deque<Group> pending;            // started, not yet pushed
  std::vector<cudaEvent_t> free_events;

  cudaEvent_t TakeEvent() {
    if (!free_events.empty()) {
      cudaEvent_t e = free_events.back();
      free_events.pop_back();
      return e;
    }
    cudaEvent_t e = nullptr;
    PSTRAIN_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    return e;
  }
};

Result<std::unique_ptr<DeviceGradients>> DeviceGradients::Create(const std::vector<Blob*>& blobs) {
  auto state = std::make_unique<State>();
  state->blobs = blobs;
  for (Blob* blob : blobs) {
    if (blob == nullptr) {
      state->pinned.push_back(nullptr);
      continue;
    }
    PSTRAIN_ASSIGN_OR_RETURN(void* p,
                             TryPinnedAlloc(static_cast<size_t>(blob->count()) * sizeof(float)));
    state->pinned.push_back(static_cast<float*>(p));
  }
  PSTRAIN_RETURN_IF_ERROR(CudaStatus(
      cudaEventCreateWithFlags(&state->backward_done, cudaEventDisableTiming), "cudaEventCreate"));
  return std::unique_ptr<DeviceGradients>(new DeviceGradients(std::move(state)));
}

DeviceGradients::DeviceGradients(std::unique_ptr<State> state) : state_(std::move(state)) {}

DeviceGradients::~DeviceGradients() {
  State& s = *state_;
  for (State::Group& g : s.pending) {
    cudaEventSynchronize(g.copied);
    s.free_events.push_back(g.copied);
  }
  for (cudaEvent_t e : s.free_events) cudaEventDestroy(e);
  if (s.backward_done != nullptr) cudaEventDestroy(s.backward_done);
  for (float* p : s.pinned) {
    if (p != nullptr) PinnedFree(p);
  }
}

void DeviceGradients::Start(const std::vector<int>& ids) {
  State& s = *state_;
  GpuContext& gpu = GpuContext::ForThisThread();
  const cudaStream_t copy = gpu.copy_stream();
  // Resolve every device pointer first: a diff whose values still live on the
  // host (zeroed there by ClearParamDiffs, or a layer whose backward did not
  // run) is uploaded now, on the compute stream, and the event below must
  // come after that upload too.
  std::vector<const float*> sources;
  sources.reserve(ids.size());
  for (int id : ids) {
    PSTRAIN_CHECK(s.blobs[static_cast<size_t>(id)] != nullptr);
    sources.push_back(s.blobs[static_cast<size_t>(id)]->gpu_diff());
  }
  // The copies follow everything queued so far on the compute stream (this
  // layer's backward, which wrote the diffs, and those uploads).
  PSTRAIN_CUDA_CHECK(cudaEventRecord(s.backward_done, gpu.stream()));
  PSTRAIN_CUDA_CHECK(cudaStreamWaitEvent(copy, s.backward_done, 0));
  State::Group group;
  group.ids = ids;
  for (size_t k = 0; k < ids.size(); ++k) {
    const size_t id = static_cast<size_t>(ids[k]);
    float* host = s.pinned[id];
    PSTRAIN_CUDA_CHECK(cudaMemcpyAsync(host, sources[k],
                                       static_cast<size_t>(s.blobs[id]->count()) * sizeof(float),
                                       cudaMemcpyDeviceToHost, copy));
    group.diffs.push_back(host);
  }
  group.copied = s.TakeEvent();
  PSTRAIN_CUDA_CHECK(cudaEventRecord(group.copied, copy));
  s.pending.push_back(std::move(group));
}

Status DeviceGradients::Drain(bool wait, const PushFn& push) {
  State& s = *state_;
  while (!s.pending.empty()) {
    State::Group& g = s.pending.front();
    if (wait) {
      PSTRAIN_RETURN_IF_ERROR(CudaStatus(cudaEventSynchronize(g.copied), "gradient copy"));
    } else {
      const cudaError_t err = cudaEventQuery(g.copied);
      if (err == cudaErrorNotReady) {
        // Not an error, but the runtime records it as the thread's last
        // error: clear it, or the next kernel check would report it.
        (void)cudaGetLastError();
        return Status::Ok();
      }
      PSTRAIN_RETURN_IF_ERROR(CudaStatus(err, "gradient copy"));
    }
    PSTRAIN_RETURN_IF_ERROR(push(g.ids, g.diffs));
    s.free_events.push_back(g.copied);
    s.pending.pop_front();
  }
  return Status::Ok();
}

#endif  // PSTRAIN_HAVE_CUDA

}  // namespace pstrain
