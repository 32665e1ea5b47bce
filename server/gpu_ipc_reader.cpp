#include "server/gpu_ipc_reader.hpp"

#include <cstring>
#include <string>

#ifdef PSTRAIN_HAVE_CUDA
#include <cuda_runtime.h>

#include "common/cuda/cuda_check.hpp"
#include "common/cuda/device_allocator.hpp"
#include "common/cuda/gpu_context.hpp"
#endif

namespace pstrain::server {

using std::to_string;

#ifdef PSTRAIN_HAVE_CUDA
constexpr bool kCudaBuild = true;
struct GpuIpcReader::Region {
  uint64_t bytes = 0;
  char* base = nullptr;         // the worker's region, opened here
  cudaEvent_t event = nullptr;  // the worker's event, opened here
};
#else
constexpr bool kCudaBuild = false;
struct GpuIpcReader::Region {
  uint64_t bytes = 0;
};
#endif

GpuIpcReader::GpuIpcReader(transport::ShardGpuFacts facts) : facts_(std::move(facts)) {
  facts_.cuda_build = kCudaBuild;
}

GpuIpcReader::~GpuIpcReader() {
  for (auto& [worker, region] : regions_) Close(*region);
#ifdef PSTRAIN_HAVE_CUDA
  if (staging_ != nullptr) PinnedFree(staging_);
#endif
}

std::optional<GpuIpcAnswer> GpuIpcReader::OnHello(const Header& hello) {
  const int worker = hello.sender();
  if (auto it = regions_.find(worker); it != regions_.end()) {
    Close(*it->second);
    regions_.erase(it);
  }
  if (!hello.has_gpu_ipc_offer()) return std::nullopt;
  const GpuIpcOffer& offer = hello.gpu_ipc_offer();
  GpuIpcAnswer answer;
  std::string why = transport::ShardGpuIpcBlocker(offer, facts_);
  auto region = std::make_unique<Region>();
  if (why.empty()) {
    if (Status s = Open(offer, region.get()); !s.ok()) why = s.message();
  }
  answer.set_accepted(why.empty());
  if (why.empty()) {
    answer.set_reason("shard " + to_string(facts_.shard) +
                      " reads from gpu:" + to_string(facts_.device));
    regions_[worker] = std::move(region);
  } else {
    answer.set_reason(why);
  }
  return answer;
}

Status GpuIpcReader::Read(const Header& push, std::vector<float*>* payloads) {
  const int worker = push.sender();
  auto it = regions_.find(worker);
  if (it == regions_.end()) {
    return Status::InvalidArgument("worker " + to_string(worker) +
                                   " pushed through GPU IPC without an accepted offer");
  }
  Region& region = *it->second;
  PSTRAIN_RETURN_IF_ERROR(transport::CheckIpcSlices(push, region.bytes));
  size_t total = 0;
  for (const ChunkRef& ref : push.chunks()) total += ref.length() * sizeof(float);
  PSTRAIN_RETURN_IF_ERROR(Reserve(total));
  payloads->clear();
#ifdef PSTRAIN_HAVE_CUDA
  const std::string whose = "worker " + to_string(worker) + "'s IPC slice";
  // The device may have been left on another one by nothing else here, but
  // DeviceChunks selects it per call too: the same context and stream.
  GpuContext& gpu = GpuContext::ForThisThread();
  if (gpu.device() != facts_.device) PSTRAIN_RETURN_IF_ERROR(gpu.SelectDevice(facts_.device));
  const cudaStream_t stream = gpu.stream();
  // The worker recorded its event after the copies into the slices it
  // pushed, before sending the PUSH: the copies below follow them. The same
  // stream also orders them after any earlier copy out of staging_.
  PSTRAIN_RETURN_IF_ERROR(CudaStatus(cudaStreamWaitEvent(stream, region.event, 0),
                                     "cudaStreamWaitEvent on " + whose + "s' event"));
  size_t at = 0;
  for (int i = 0; i < push.chunks_size(); ++i) {
    const size_t bytes = push.chunks(i).length() * sizeof(float);
    char* host = reinterpret_cast<char*>(staging_) + at;
    PSTRAIN_RETURN_IF_ERROR(CudaStatus(cudaMemcpyAsync(host, region.base + push.ipc_offsets(i),
                                                       bytes, cudaMemcpyDeviceToHost, stream),
                                       "cudaMemcpyAsync of " + whose));
    payloads->push_back(reinterpret_cast<float*>(host));
    at += bytes;
  }
  PSTRAIN_RETURN_IF_ERROR(
      CudaStatus(cudaStreamSynchronize(stream), "cudaStreamSynchronize after " + whose + "s"));
  ++pushes_read_;
  bytes_read_ += static_cast<int64_t>(total);
  return Status::Ok();
#else
  return Status::FailedPrecondition("shard " + to_string(facts_.shard) +
                                    "'s build has no CUDA");  // no region opens without CUDA
#endif
}

#ifdef PSTRAIN_HAVE_CUDA

Status GpuIpcReader::Open(const GpuIpcOffer& offer, Region* region) {
  cudaIpcMemHandle_t mem;
  cudaIpcEventHandle_t event;
  if (offer.mem_handle().size() != sizeof(mem) || offer.event_handle().size() != sizeof(event)) {
    return Status::InvalidArgument("the offer's handles have " +
                                   to_string(offer.mem_handle().size()) + " and " +
                                   to_string(offer.event_handle().size()) + " bytes, not " +
                                   to_string(sizeof(mem)) + " and " + to_string(sizeof(event)));
  }
  std::memcpy(&mem, offer.mem_handle().data(), sizeof(mem));
  std::memcpy(&event, offer.event_handle().data(), sizeof(event));
  GpuContext& gpu = GpuContext::ForThisThread();
  if (gpu.device() != facts_.device) PSTRAIN_RETURN_IF_ERROR(gpu.SelectDevice(facts_.device));
  void* base = nullptr;
  PSTRAIN_RETURN_IF_ERROR(CudaStatus(
      cudaIpcOpenMemHandle(&base, mem, cudaIpcMemLazyEnablePeerAccess), "cudaIpcOpenMemHandle"));
  cudaEvent_t opened = nullptr;
  if (Status s = CudaStatus(cudaIpcOpenEventHandle(&opened, event), "cudaIpcOpenEventHandle");
      !s.ok()) {
    (void)cudaIpcCloseMemHandle(base);
    return s;
  }
  region->bytes = offer.region_bytes();
  region->base = static_cast<char*>(base);
  region->event = opened;
  return Status::Ok();
}

void GpuIpcReader::Close(Region& region) {
  // Nothing of ours reads the region once Read has returned (it synchronises).
  if (region.event != nullptr) (void)cudaEventDestroy(region.event);
  if (region.base != nullptr) (void)cudaIpcCloseMemHandle(region.base);
  region.event = nullptr;
  region.base = nullptr;
}

Status GpuIpcReader::Reserve(size_t bytes) {
  if (bytes <= staging_bytes_) return Status::Ok();
  if (staging_ != nullptr) {
    // An earlier copy out of the buffer may still be queued: let it finish.
    PSTRAIN_RETURN_IF_ERROR(CudaStatus(cudaStreamSynchronize(GpuContext::ForThisThread().stream()),
                                       "cudaStreamSynchronize before growing the IPC staging"));
    PinnedFree(staging_);
    staging_ = nullptr;
    staging_bytes_ = 0;
  }
  PSTRAIN_ASSIGN_OR_RETURN(void* p, TryPinnedAlloc(bytes));
  staging_ = static_cast<float*>(p);
  staging_bytes_ = bytes;
  return Status::Ok();
}

#else  // PSTRAIN_HAVE_CUDA

Status GpuIpcReader::Open(const GpuIpcOffer&, Region*) {
  return Status::FailedPrecondition("shard " + to_string(facts_.shard) + "'s build has no CUDA");
}
void GpuIpcReader::Close(Region&) {}
Status GpuIpcReader::Reserve(size_t) { return Status::Ok(); }

#endif  // PSTRAIN_HAVE_CUDA

}  // namespace pstrain::server
