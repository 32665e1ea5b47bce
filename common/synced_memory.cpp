#include "common/synced_memory.hpp"

#include <cstdlib>
#include <cstring>

#include "common/out_of_memory.hpp"

#ifdef PSTRAIN_HAVE_CUDA
#include "common/cuda/cuda_check.hpp"
#include "common/cuda/device_allocator.hpp"
#include "common/cuda/gpu_context.hpp"
#endif

namespace pstrain {

static size_t HostBytes(size_t count) { return (count * sizeof(float) + 63) / 64 * 64; }

SyncedMemory::SyncedMemory(size_t count) : count_(count) {}

#ifndef PSTRAIN_HAVE_CUDA

SyncedMemory::~SyncedMemory() { std::free(host_); }

void SyncedMemory::AllocateHost() {
  if (host_ != nullptr || count_ == 0) return;
  const size_t bytes = HostBytes(count_);
  host_ = static_cast<float*>(std::aligned_alloc(64, bytes));
  if (host_ == nullptr) throw OutOfMemoryError(HostOutOfMemory(bytes));
  std::memset(host_, 0, bytes);
}

const float* SyncedMemory::host_data() {
  AllocateHost();
  return host_;
}

float* SyncedMemory::mutable_host_data() {
  AllocateHost();
  return host_;
}

#else  // PSTRAIN_HAVE_CUDA

SyncedMemory::~SyncedMemory() {
  // Quietly: a destructor may run while a device failure is being reported.
  if (upload_done_ != nullptr) {
    if (upload_in_flight_) (void)cudaEventSynchronize(upload_done_);
    (void)cudaEventDestroy(upload_done_);
  }
  std::free(host_);
  DeviceFree(device_);
}

void SyncedMemory::AllocateHost() {
  if (host_ != nullptr || count_ == 0) return;
  const size_t bytes = HostBytes(count_);
  host_ = static_cast<float*>(std::aligned_alloc(64, bytes));
  if (host_ == nullptr) throw OutOfMemoryError(HostOutOfMemory(bytes));
  std::memset(host_, 0, bytes);
}

void SyncedMemory::WaitForUpload() {
  if (!upload_in_flight_) return;
  PSTRAIN_CUDA_CHECK(cudaEventSynchronize(upload_done_));
  upload_in_flight_ = false;
}

void SyncedMemory::ToHost() {
  switch (head_) {
    case Head::kUninitialized:
      AllocateHost();
      head_ = Head::kAtHost;
      break;
    case Head::kAtDevice: {
      AllocateHost();
      GpuContext& context = GpuContext::ForThisThread();
      PSTRAIN_CUDA_CHECK(cudaMemcpyAsync(host_, device_, count_ * sizeof(float),
                                         cudaMemcpyDeviceToHost, context.stream()));
      context.Synchronize();
      head_ = Head::kSynced;
      break;
    }
    case Head::kAtHost:
    case Head::kSynced:
      break;
  }
}

void SyncedMemory::ToDevice() {
  if (count_ == 0) return;
  switch (head_) {
    case Head::kUninitialized: {
      device_ = static_cast<float*>(DeviceAlloc(count_ * sizeof(float)));
      PSTRAIN_CUDA_CHECK(cudaMemsetAsync(device_, 0, count_ * sizeof(float),
                                         GpuContext::ForThisThread().stream()));
      head_ = Head::kAtDevice;
      break;
    }
    case Head::kAtHost: {
      if (device_ == nullptr) device_ = static_cast<float*>(DeviceAlloc(count_ * sizeof(float)));
      const cudaStream_t stream = GpuContext::ForThisThread().stream();
      PSTRAIN_CUDA_CHECK(cudaMemcpyAsync(device_, host_, count_ * sizeof(float),
                                         cudaMemcpyHostToDevice, stream));
      if (upload_done_ == nullptr) {
        PSTRAIN_CUDA_CHECK(cudaEventCreateWithFlags(&upload_done_, cudaEventDisableTiming));
      }
      PSTRAIN_CUDA_CHECK(cudaEventRecord(upload_done_, stream));
      upload_in_flight_ = true;
      head_ = Head::kSynced;
      break;
    }
    case Head::kAtDevice:
    case Head::kSynced:
      break;
  }
}

const float* SyncedMemory::host_data() {
  ToHost();
  return host_;
}

float* SyncedMemory::mutable_host_data() {
  ToHost();
  WaitForUpload();
  if (count_ > 0) head_ = Head::kAtHost;
  return host_;
}

const float* SyncedMemory::device_data() {
  ToDevice();
  return device_;
}

float* SyncedMemory::mutable_device_data() {
  ToDevice();
  if (count_ > 0) head_ = Head::kAtDevice;
  return device_;
}

#endif  // PSTRAIN_HAVE_CUDA

}  // namespace pstrain
