// GpuIpcReader: a GPU shard's side of GPU IPC pushes (docs/wire-protocol.md,
// "GPU IPC pushes"; the decisions in common/transport/gpu_path.hpp).
//
// Per worker it holds the device region and interprocess event the worker
// offered in HELLO, opened once on the shard's device (cudaIpcOpenMemHandle,
// cudaIpcOpenEventHandle) and closed when that worker says HELLO again (a
// restarted worker offers a new region) or the reader goes. Read() turns an
// IPC PUSH into the payloads a socket PUSH has: the shard's stream waits on
// the worker's event, copies each slice device-to-host into a pinned buffer
// of the reader's, and synchronises; the shard's usual PUSH path then applies
// them. So a gradient is summed and applied by the same code on the same
// values whichever way it came (bit for bit in bsp).
//
// The worker reuses its region for the next iteration only after its pull of
// that iteration was answered, which in bsp needs this shard to have read the
// slices (ShardGpuIpcBlocker admits bsp without backup workers only).
//
// Not thread-safe: the shard's event loop owns it. In a build without CUDA
// every offer is refused ("shard 0's build has no CUDA") and nothing opens.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "common/status.hpp"
#include "common/transport/gpu_path.hpp"
#include "proto/pstrain.pb.h"

namespace pstrain::server {

class GpuIpcReader {
 public:
  // facts.cuda_build is set by the reader (whether this build has CUDA).
  explicit GpuIpcReader(transport::ShardGpuFacts facts);
  ~GpuIpcReader();
  GpuIpcReader(const GpuIpcReader&) = delete;
  GpuIpcReader& operator=(const GpuIpcReader&) = delete;

  // Worker `worker`'s HELLO: closes the region it offered before (if any);
  // with an offer, accepts it (opening its handles) or refuses with the
  // reason (ShardGpuIpcBlocker's, or the CUDA call that failed:
  // "cudaIpcOpenMemHandle: cudaErrorX (...)"). nullopt without an offer.
  std::optional<GpuIpcAnswer> OnHello(const Header& hello);

  // Copies the slices of `push` (Validate passed: CheckIpcPushShape) into
  // host buffers of the reader's, one per chunk in `payloads` (replaced),
  // valid until the next Read. Errors (nothing copied): "worker 2 pushed
  // through GPU IPC without an accepted offer", CheckIpcSlices's, a CUDA
  // call's ("cudaMemcpyAsync of worker 2's IPC slice: cudaErrorX (...)").
  Status Read(const Header& push, std::vector<float*>* payloads);

  bool has_region(int worker) const { return regions_.count(worker) > 0; }
  int64_t pushes_read() const { return pushes_read_; }  // IPC PUSHes copied in
  int64_t bytes_read() const { return bytes_read_; }

 private:
  struct Region;  // an opened offer (CUDA builds only)
  Status Open(const GpuIpcOffer& offer, Region* region);
  void Close(Region& region);
  Status Reserve(size_t bytes);  // the pinned staging buffer holds `bytes`

  transport::ShardGpuFacts facts_;
  std::map<int, std::unique_ptr<Region>> regions_;  // by worker rank
  float* staging_ = nullptr;                        // pinned; staging_bytes_ long
  size_t staging_bytes_ = 0;
  int64_t pushes_read_ = 0;
  int64_t bytes_read_ = 0;
};

}  // namespace pstrain::server
