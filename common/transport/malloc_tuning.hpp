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

// Transparent huge pages for the heap. With THP in `madvise` mode (the usual
// default) glibc's heap, and so every received frame, the shard's weights and
// history and the blobs, sits on 4 KiB pages; the kernel's socket copies and
// the update loops then take a TLB miss every 4 KiB, which in a VM is a
// two-level page walk. glibc asks for huge pages on its heap with the tunable
// glibc.malloc.hugetlb=1 (glibc >= 2.35; older ones ignore it), which is read
// only at start-up: so this re-executes the program (same pid, arguments and
// descriptors) with that tunable added to GLIBC_TUNABLES, once. It returns
// (doing nothing) when the tunable is already set, when THP is `never`, when
// PSTRAIN_MALLOC_HUGETLB=0, or when exec fails. Call it first in main(),
// before any thread starts. Measured (docs/benchmarks-history.md, 2026-12-05):
// ps-bench 16 MB +2 %, 64 MB +5 %.
void ReexecWithHugePageHeap(char** argv);

}  // namespace pstrain::transport
