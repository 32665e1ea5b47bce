#include "worker/ps/gpu_region.hpp"

#include <string>

#include "common/transport/gpu_path.hpp"

#ifdef PSTRAIN_HAVE_CUDA
#include <cuda_runtime.h>

#include "common/cuda/cuda_check.hpp"
#include "common/cuda/gpu_context.hpp"
#endif

namespace pstrain {

#ifndef PSTRAIN_HAVE_CUDA

struct GpuGradientRegion::Cuda {};

Result<std::unique_ptr<GpuGradientRegion>> GpuGradientRegion::Create(const std::vector<Blob*>&) {
  return Status::FailedPrecondition("GPU IPC pushes need a CUDA build");
}
GpuGradientRegion::~GpuGradientRegion() = default;
Status GpuGradientRegion::Start(const std::vector<int>&) {
  return Status::FailedPrecondition("GPU IPC pushes need a CUDA build");
}

#else  // PSTRAIN_HAVE_CUDA

struct GpuGradientRegion::Cuda {
  char* base = nullptr;                 // cudaMalloc'd, the exported region
  cudaEvent_t backward_done = nullptr;  // compute stream -> copy stream
  cudaEvent_t copied = nullptr;         // interprocess, recorded after each group's copies
};

Result<std::unique_ptr<GpuGradientRegion>> GpuGradientRegion::Create(
    const std::vector<Blob*>& blobs) {
  std::unique_ptr<GpuGradientRegion> region(new GpuGradientRegion());
  region->blobs_ = blobs;
  region->cuda_ = std::make_unique<Cuda>();
  Cuda& c = *region->cuda_;
  uint64_t bytes = 0;
  for (const Blob* blob : blobs) {
    region->offsets_.push_back(bytes);
    bytes += (static_cast<uint64_t>(blob->count()) * sizeof(float) + 255) / 256 * 256;
  }
  if (bytes == 0) bytes = 256;  // a net without parameters still offers a region
  int device = 0;
  PSTRAIN_RETURN_IF_ERROR(CudaStatus(cudaGetDevice(&device), "cudaGetDevice"));
  char bus_id[32] = {};
  PSTRAIN_RETURN_IF_ERROR(
      CudaStatus(cudaDeviceGetPCIBusId(bus_id, sizeof(bus_id), device), "cudaDeviceGetPCIBusId"));
  void* base = nullptr;
  PSTRAIN_RETURN_IF_ERROR(
      CudaStatus(cudaMalloc(&base, bytes),
                 "cudaMalloc of the " + std::to_string(bytes) + "-byte GPU IPC region"));
  c.base = static_cast<char*>(base);
  PSTRAIN_RETURN_IF_ERROR(
      CudaStatus(cudaMemset(base, 0, bytes), "cudaMemset of the GPU IPC region"));
  PSTRAIN_RETURN_IF_ERROR(
      CudaStatus(cudaEventCreateWithFlags(&c.backward_done, cudaEventDisableTiming),
                 "cudaEventCreateWithFlags"));
  PSTRAIN_RETURN_IF_ERROR(CudaStatus(
      cudaEventCreateWithFlags(&c.copied, cudaEventInterprocess | cudaEventDisableTiming),
      "cudaEventCreateWithFlags(cudaEventInterprocess)"));
  cudaIpcMemHandle_t mem;
  PSTRAIN_RETURN_IF_ERROR(CudaStatus(cudaIpcGetMemHandle(&mem, base), "cudaIpcGetMemHandle"));
  cudaIpcEventHandle_t event;
  PSTRAIN_RETURN_IF_ERROR(
      CudaStatus(cudaIpcGetEventHandle(&event, c.copied), "cudaIpcGetEventHandle"));
  GpuIpcOffer& offer = region->offer_;
  offer.set_host_id(transport::LocalHostId());
  offer.set_device(bus_id);
  offer.set_mem_handle(reinterpret_cast<const char*>(&mem), sizeof(mem));
  offer.set_event_handle(reinterpret_cast<const char*>(&event), sizeof(event));
  offer.set_region_bytes(bytes);
  return region;
}

GpuGradientRegion::~GpuGradientRegion() {
  if (!cuda_) return;
  Cuda& c = *cuda_;
  // Copies still queued into the region finish before it is freed.
  (void)cudaStreamSynchronize(GpuContext::ForThisThread().copy_stream());
  (void)cudaGetLastError();
  if (c.copied != nullptr) (void)cudaEventDestroy(c.copied);
  if (c.backward_done != nullptr) (void)cudaEventDestroy(c.backward_done);
  if (c.base != nullptr) (void)cudaFree(c.base);
}

Status GpuGradientRegion::Start(const std::vector<int>& ids) {
  Cuda& c = *cuda_;
  GpuContext& gpu = GpuContext::ForThisThread();
  const cudaStream_t copy = gpu.copy_stream();
  // Resolve the device pointers first: a diff still on the host (zeroed
  // there, or a layer whose backward did not run) is uploaded now, on the
  // compute stream, and the event below comes after that upload too.
  std::vector<const float*> sources;
  sources.reserve(ids.size());
  for (int id : ids) sources.push_back(blobs_[static_cast<size_t>(id)]->gpu_diff());
  PSTRAIN_RETURN_IF_ERROR(CudaStatus(cudaEventRecord(c.backward_done, gpu.stream()),
                                     "cudaEventRecord after the layer's backward"));
  PSTRAIN_RETURN_IF_ERROR(CudaStatus(cudaStreamWaitEvent(copy, c.backward_done, 0),
                                     "cudaStreamWaitEvent of the copy stream"));
  for (size_t k = 0; k < ids.size(); ++k) {
    const size_t id = static_cast<size_t>(ids[k]);
    const size_t bytes = static_cast<size_t>(blobs_[id]->count()) * sizeof(float);
    PSTRAIN_RETURN_IF_ERROR(CudaStatus(
        cudaMemcpyAsync(c.base + offsets_[id], sources[k], bytes, cudaMemcpyDeviceToDevice, copy),
        "cudaMemcpyAsync of param " + std::to_string(id) + "'s gradient into the GPU IPC region"));
  }
  PSTRAIN_RETURN_IF_ERROR(
      CudaStatus(cudaEventRecord(c.copied, copy), "cudaEventRecord of the GPU IPC event"));
  ++groups_started_;
  return Status::Ok();
}

#endif  // PSTRAIN_HAVE_CUDA

}  // namespace pstrain
