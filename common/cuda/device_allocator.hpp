// Device memory through a caching allocator, and pinned host memory for
// transfers (CUDA builds only).
//
// DeviceAlloc rounds a request up to a size class (four classes per power of
// two, at least 512 bytes) and reuses a cached block of that class on the
// current device; DeviceFree returns the block to the cache, never to CUDA.
// Reuse is stream-safe: a block freed by a thread whose stream() may still
// be using it is handed to another stream only after that work (an event).
// When cudaMalloc runs out of memory the device's cache is released and the
// allocation retried once. Thread-safe (one mutex for the cache).
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/status.hpp"

namespace pstrain {

// Memory on the calling thread's device (GpuContext::ForThisThread().device()).
// bytes == 0 gives nullptr. Out of memory (after releasing this device's
// cache and retrying) is ResourceExhausted naming the request, the device's
// free and total memory and what PSTrain holds; another failure (no device)
// names the size, the device and CUDA's reason.
Result<void*> TryDeviceAlloc(size_t bytes);
// As TryDeviceAlloc for callers that cannot return a Status (SyncedMemory,
// layer workspaces): out of memory throws OutOfMemoryError
// (common/out_of_memory.hpp) with that Status; any other failure aborts.
void* DeviceAlloc(size_t bytes);
// REQUIRES: ptr from DeviceAlloc/TryDeviceAlloc and not yet freed, or null.
// After a device failure (a faulted kernel) the block is released without
// checks, so that teardown while reporting that failure cannot abort. Work queued on other threads'
// streams or on copy streams that uses the block must be complete or ordered before this thread's
// stream().
void DeviceFree(void* ptr);

struct DeviceMemoryStats {
  int64_t in_use_bytes = 0;  // handed out and not freed (size-class bytes)
  int64_t cached_bytes = 0;  // freed, kept for reuse
  int64_t cuda_mallocs = 0;  // cudaMalloc calls so far
  int64_t cache_hits = 0;    // DeviceAlloc calls served from the cache
};
DeviceMemoryStats GetDeviceMemoryStats();

// For CUDA graph capture (worker/cuda_graph_pass.hpp). A block freed while
// the freeing thread's stream captures a graph has its event recorded into
// the capture, and no stream outside the capture may wait on such an event.
// Call this after the capture ended (however it ended): it records those
// events again on their streams, so the blocks are handed out as any other.
// A block freed in a capture that was broken by then is kept out of the
// cache. The graph keeps the blocks' addresses: REQUIRES of its owner that
// nothing else takes them while the graph may still be launched.
Status RecordCapturedFrees();

// The size class a request is served from (exposed for tests).
size_t DeviceSizeClass(size_t bytes);

// Page-locked host memory (cudaHostAlloc, portable across devices); copies
// from and to it run asynchronously. bytes == 0 gives nullptr. Out of memory
// is ResourceExhausted naming the request, the host's free and total memory
// and the current device's.
Result<void*> TryPinnedAlloc(size_t bytes);
// REQUIRES: ptr from TryPinnedAlloc, or null.
void PinnedFree(void* ptr);

}  // namespace pstrain
