// GpuGradientRegion: a GPU worker's side of GPU IPC pushes
// (docs/wire-protocol.md, "GPU IPC pushes"; the decisions in
// common/transport/gpu_path.hpp, the shard's side in server/gpu_ipc_reader.hpp).
//
// One device allocation of its own (cudaMalloc, not the blobs' diffs, which
// the caching allocator may move, and not a sub-block: an IPC handle always
// names a whole allocation) holds every parameter's gradient, parameter p
// at byte offset offsets()[p] (256-byte aligned). It is exported once
// (cudaIpcGetMemHandle) with an interprocess event (cudaEventInterprocess |
// cudaEventDisableTiming, cudaIpcGetEventHandle); offer() carries both to
// the shards in HELLO. Start(ids) queues, on GpuContext's copy stream and
// after the work queued so far on the compute stream, device-to-device
// copies of those parameters' diffs into the region, then records the
// event: a shard that waits on it after the PUSH arrived reads these values.
//
// REQUIRES of the caller: a slice is written again (the next iteration's
// Start) only after the shards read it; in bsp the worker's pull of the next
// iteration is answered only after that (the worker starts no backward
// before), which is why the path is bsp-only.
//
// Not thread-safe: the worker's thread (whose GpuContext runs the net) owns
// it. In a build without CUDA, Create fails.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "common/blob.hpp"
#include "common/status.hpp"
#include "proto/pstrain.pb.h"

namespace pstrain {

class GpuGradientRegion {
 public:
  // A region for blobs[p]'s diff (count() floats each) on the current device.
  // Errors name the CUDA call ("cudaMalloc of the 102760448-byte GPU IPC
  // region: cudaErrorMemoryAllocation (out of memory)").
  static Result<std::unique_ptr<GpuGradientRegion>> Create(const std::vector<Blob*>& blobs);
  ~GpuGradientRegion();
  GpuGradientRegion(const GpuGradientRegion&) = delete;
  GpuGradientRegion& operator=(const GpuGradientRegion&) = delete;

  // The HELLO offer: this host's id, the device's PCI bus id, the handles
  // and the region's size.
  const GpuIpcOffer& offer() const { return offer_; }
  // Byte offset of parameter p's gradient in the region.
  const std::vector<uint64_t>& offsets() const { return offsets_; }
  // Queues the copies of blobs[ids]'s diffs and records the event (see the
  // top). Errors name the CUDA call. REQUIRES: ids valid, non-empty.
  Status Start(const std::vector<int>& ids);
  int64_t groups_started() const { return groups_started_; }

 private:
  struct Cuda;  // the allocation and events (CUDA builds)
  GpuGradientRegion() = default;

  std::vector<Blob*> blobs_;
  std::vector<uint64_t> offsets_;
  GpuIpcOffer offer_;
  std::unique_ptr<Cuda> cuda_;
  int64_t groups_started_ = 0;
};

}  // namespace pstrain
