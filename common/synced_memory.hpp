// SyncedMemory: one float buffer with a host copy (and, in CUDA builds, a
// device copy) that is synchronised lazily. Owned by Blob through shared_ptr
// so that blobs can share storage (in-place layers, shared weights).
// Not thread-safe: one thread uses a given buffer at a time.
#pragma once

#include <cstddef>

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

 private:
  void AllocateHost();
  size_t count_;
  float* host_ = nullptr;  // 64-byte aligned, owned
};

}  // namespace pstrain
