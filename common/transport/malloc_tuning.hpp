// Receive-buffer reuse for large frames.
//
// ZeroMQ mallocs a fresh buffer for every received frame larger than 8 KiB.
// By default glibc serves large requests with new mmap()s and unmaps them on
// free, so every large frame lands on pages never touched before, and first
// touches are slow (measured here: 64 MB frames arrive at ~1.1 GB/s over
// loopback tcp, against ~3.1 GB/s for raw tcp into a reused buffer). After
// this call glibc serves requests below 32 MiB from its heaps and keeps freed
// memory (up to `keep_free_bytes` at a heap's end) for the next frame.
//
// Process-wide: call once at the start of main() of a server or worker,
// before threads start. Frames of 32 MiB and more still get fresh pages, and
// ZeroMQ's I/O thread heaps hold 64 MiB: keep chunks (KeyPlacement
// chunk_bytes) at or below 16 MiB; 1-4 MiB is best (docs/wire-protocol.md).
#pragma once

#include <cstddef>

#include "common/status.hpp"

namespace pstrain::transport {

inline constexpr size_t kLargestReusedFrameBytes = size_t{32} << 20;

Status TuneMallocForLargeFrames(size_t keep_free_bytes = size_t{1} << 30);

}  // namespace pstrain::transport
