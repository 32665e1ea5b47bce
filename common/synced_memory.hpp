// SyncedMemory: one float buffer with a host copy (and, in CUDA builds, a
// device copy) that is synchronised lazily. Owned by Blob through shared_ptr
// so that blobs can share storage (in-place layers, shared weights).
// Not thread-safe: one thread uses a given buffer at a time.
//
// CUDA builds track where the current values live (Caffe's head):
//   kUninitialized -> first access allocates that side, zero-filled
//   kAtHost        -> host is current; device_data() copies host -> device
//   kAtDevice      -> device is current; host_data() copies device -> host
//   kSynced        -> both hold the same values
// A mutable_ accessor makes its side the only current one. Copies run on
// GpuContext::ForThisThread().stream(); a copy to the host waits for it, and
// mutable_host_data() waits for an upload still reading the host buffer (that
// upload's own event, not the whole stream: a parameter-server worker writes
// pulled weights into host memory while the backward pass is still queued).
// Host memory is plain 64-byte-aligned memory.
//
// Memory is allocated on first access. When the host or the device has no
// room, the accessor throws OutOfMemoryError (common/out_of_memory.hpp), whose
// ResourceExhausted Status names the request and the free memory; the
// trainer and the programs turn it back into that Status.
#pragma once

#include <cstddef>

#ifdef PSTRAIN_HAVE_CUDA
struct CUevent_st;  // cudaEvent_t's struct (cuda_runtime_api.h)
#endif

namespace pstrain {

class SyncedMemory {
 public:
  explicit SyncedMemory(size_t count);  // count floats, zero-filled on first host access
  ~SyncedMemory();
  SyncedMemory(const SyncedMemory&) = delete;
  SyncedMemory& operator=(const SyncedMemory&) = delete;

  size_t count() const { return count_; }
  const float* host_data();
  float* mutable_host_data();

#ifdef PSTRAIN_HAVE_CUDA
  enum class Head { kUninitialized, kAtHost, kAtDevice, kSynced };
  Head head() const { return head_; }
  const float* device_data();
  float* mutable_device_data();
#endif

 private:
  void AllocateHost();
  size_t count_;
  float* host_ = nullptr;  // 64-byte aligned, owned

#ifdef PSTRAIN_HAVE_CUDA
  void ToHost();
  void ToDevice();
  void WaitForUpload();

  float* device_ = nullptr;  // from DeviceAlloc, owned
  Head head_ = Head::kUninitialized;
  bool upload_in_flight_ = false;  // an async host -> device copy may still read host_
  CUevent_st* upload_done_ = nullptr;  // recorded after the last upload; made on the first
#endif
};

}  // namespace pstrain
