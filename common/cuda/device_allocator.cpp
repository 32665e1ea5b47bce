#include "common/cuda/device_allocator.hpp"

#include <cuda_runtime.h>

#include <bit>
#include <cstdio>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/cuda/cuda_check.hpp"
#include "common/cuda/gpu_context.hpp"
#include "common/out_of_memory.hpp"

namespace pstrain {
namespace {

struct Block {
  size_t bytes = 0;  // size class
  int device = 0;
  cudaStream_t stream = nullptr;  // the freeing thread's stream
  cudaEvent_t freed = nullptr;    // recorded on `stream` at the last free
};

// Process-wide cache; never destroyed (the CUDA runtime may be gone at exit).
struct DeviceCache {
  std::mutex mu;
  std::unordered_map<void*, Block> in_use;
  std::map<std::pair<int, size_t>, std::vector<std::pair<void*, Block>>> free;
  // Blocks freed while their stream was capturing a CUDA graph, whose events
  // RecordCapturedFrees records again.
  std::set<void*> freed_in_capture;
  DeviceMemoryStats stats;
};

DeviceCache& Cache() {
  static DeviceCache* cache = new DeviceCache;
  return *cache;
}

std::string MiB(double bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.0f MiB", bytes / (1 << 20));
  return text;
}

// "device N: <free> MiB free of <total> MiB", or why that is unknown.
std::string DeviceMemoryText(int device) {
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  const cudaError_t err = cudaMemGetInfo(&free_bytes, &total_bytes);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return "device " + std::to_string(device) + ": free memory unknown (" + CudaErrorText(err) +
           ")";
  }
  return "device " + std::to_string(device) + ": " + MiB(static_cast<double>(free_bytes)) +
         " free of " + MiB(static_cast<double>(total_bytes));
}

// Returns the cached blocks of `device` to CUDA.
void Trim(int device) {
  std::vector<std::pair<void*, Block>> blocks;
  {
    DeviceCache& cache = Cache();
    std::lock_guard<std::mutex> lock(cache.mu);
    for (auto it = cache.free.begin(); it != cache.free.end();) {
      if (it->first.first != device) {
        ++it;
        continue;
      }
      for (auto& b : it->second) {
        cache.stats.cached_bytes -= static_cast<int64_t>(b.second.bytes);
        blocks.push_back(b);
      }
      it = cache.free.erase(it);
    }
  }
  if (blocks.empty()) return;
  int current = 0;
  PSTRAIN_CUDA_CHECK(cudaGetDevice(&current));
  for (auto& [ptr, block] : blocks) {
    PSTRAIN_CUDA_CHECK(cudaSetDevice(block.device));
    if (block.freed != nullptr) PSTRAIN_CUDA_CHECK(cudaEventDestroy(block.freed));
    PSTRAIN_CUDA_CHECK(cudaFree(ptr));  // waits for the device
  }
  PSTRAIN_CUDA_CHECK(cudaSetDevice(current));
}

}  // namespace

size_t DeviceSizeClass(size_t bytes) {
  if (bytes <= 512) return 512;
  const size_t step = std::bit_floor(bytes - 1) / 4;
  return (bytes + step - 1) / step * step;
}

Result<void*> TryDeviceAlloc(size_t bytes) {
  if (bytes == 0) return static_cast<void*>(nullptr);
  GpuContext& context = GpuContext::ForThisThread();
  const int device = context.device();
  const size_t size = DeviceSizeClass(bytes);
  DeviceCache& cache = Cache();
  {
    std::unique_lock<std::mutex> lock(cache.mu);
    auto it = cache.free.find({device, size});
    if (it != cache.free.end() && !it->second.empty()) {
      auto [ptr, block] = it->second.back();
      it->second.pop_back();
      cache.in_use.emplace(ptr, block);
      cache.stats.cached_bytes -= static_cast<int64_t>(size);
      cache.stats.in_use_bytes += static_cast<int64_t>(size);
      ++cache.stats.cache_hits;
      lock.unlock();
      cudaStream_t stream = context.stream();
      if (block.stream != stream) PSTRAIN_CUDA_CHECK(cudaStreamWaitEvent(stream, block.freed, 0));
      return ptr;
    }
  }
  void* ptr = nullptr;
  cudaError_t err = cudaMalloc(&ptr, size);
  if (err == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    Trim(device);
    err = cudaMalloc(&ptr, size);
  }
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    const std::string what =
        "cannot allocate " + ByteSizeText(bytes) + " on CUDA device " + std::to_string(device);
    if (err != cudaErrorMemoryAllocation) return CudaStatus(err, what);
    const DeviceMemoryStats stats = GetDeviceMemoryStats();
    return Status::ResourceExhausted(what + ": out of memory (" + DeviceMemoryText(device) +
                                     "; PSTrain holds " +
                                     MiB(static_cast<double>(stats.in_use_bytes)) + " in use, " +
                                     MiB(static_cast<double>(stats.cached_bytes)) + " cached)");
  }
  std::lock_guard<std::mutex> lock(cache.mu);
  Block block;
  block.bytes = size;
  block.device = device;
  cache.in_use.emplace(ptr, block);
  cache.stats.in_use_bytes += static_cast<int64_t>(size);
  ++cache.stats.cuda_mallocs;
  return ptr;
}

void* DeviceAlloc(size_t bytes) {
  Result<void*> ptr = TryDeviceAlloc(bytes);
  if (!ptr.ok() && ptr.status().IsResourceExhausted()) throw OutOfMemoryError(ptr.status());
  PSTRAIN_CHECK_MSG(ptr.ok(), ptr.status().message());
  return ptr.value();
}

void DeviceFree(void* ptr) {
  if (ptr == nullptr) return;
  DeviceCache& cache = Cache();
  Block block;
  {
    std::lock_guard<std::mutex> lock(cache.mu);
    auto it = cache.in_use.find(ptr);
    PSTRAIN_CHECK_MSG(it != cache.in_use.end(), "DeviceFree of a pointer DeviceAlloc did not give");
    block = it->second;
    cache.in_use.erase(it);
  }
  block.stream = GpuContext::ForThisThread().stream();
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(block.stream, &capture) != cudaSuccess) {
    (void)cudaGetLastError();
    capture = cudaStreamCaptureStatusNone;
  }
  cudaError_t err = cudaSuccess;
  if (block.freed == nullptr) err = cudaEventCreateWithFlags(&block.freed, cudaEventDisableTiming);
  if (err == cudaSuccess) err = cudaEventRecord(block.freed, block.stream);
  if (err != cudaSuccess && capture != cudaStreamCaptureStatusNone) {
    // A capture that a call in it broke: the block may be in use by work
    // queued before the capture, and cudaFree now would break more. Keep
    // it out of the cache (held until exit).
    (void)cudaGetLastError();
    std::lock_guard<std::mutex> lock(cache.mu);
    cache.stats.in_use_bytes -= static_cast<int64_t>(block.bytes);
    return;
  }
  if (err != cudaSuccess) {
    // The device failed earlier (a kernel fault is sticky): this runs while
    // the process unwinds to report that error, so drop the block quietly.
    (void)cudaGetLastError();
    (void)cudaFree(ptr);
    std::lock_guard<std::mutex> lock(cache.mu);
    cache.stats.in_use_bytes -= static_cast<int64_t>(block.bytes);
    return;
  }
  std::lock_guard<std::mutex> lock(cache.mu);
  cache.free[{block.device, block.bytes}].emplace_back(ptr, block);
  cache.stats.in_use_bytes -= static_cast<int64_t>(block.bytes);
  cache.stats.cached_bytes += static_cast<int64_t>(block.bytes);
  if (capture != cudaStreamCaptureStatusNone) cache.freed_in_capture.insert(ptr);
}

Status RecordCapturedFrees() {
  DeviceCache& cache = Cache();
  std::lock_guard<std::mutex> lock(cache.mu);
  for (auto& [key, blocks] : cache.free) {
    for (auto& [ptr, block] : blocks) {
      if (cache.freed_in_capture.count(ptr) == 0) continue;
      const cudaError_t err = cudaEventRecord(block.freed, block.stream);
      if (err != cudaSuccess) {
        (void)cudaGetLastError();
        return CudaStatus(err, "recording the free of a block freed in a CUDA graph capture");
      }
    }
  }
  // Blocks in use again are recorded when next freed.
  cache.freed_in_capture.clear();
  return Status::Ok();
}

DeviceMemoryStats GetDeviceMemoryStats() {
  DeviceCache& cache = Cache();
  std::lock_guard<std::mutex> lock(cache.mu);
  return cache.stats;
}

Result<void*> TryPinnedAlloc(size_t bytes) {
  if (bytes == 0) return static_cast<void*>(nullptr);
  void* ptr = nullptr;
  const cudaError_t err = cudaHostAlloc(&ptr, bytes, cudaHostAllocPortable);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    const std::string what = "cannot allocate " + ByteSizeText(bytes) + " of pinned host memory";
    if (err != cudaErrorMemoryAllocation) return CudaStatus(err, what);
    int device = 0;
    if (cudaGetDevice(&device) != cudaSuccess) (void)cudaGetLastError();
    return Status::ResourceExhausted(what + ": out of memory (" + HostMemoryText() + "; " +
                                     DeviceMemoryText(device) + ")");
  }
  return ptr;
}

void PinnedFree(void* ptr) {
  // Unchecked: after a device failure this runs while that is reported.
  if (ptr != nullptr && cudaFreeHost(ptr) != cudaSuccess) (void)cudaGetLastError();
}

}  // namespace pstrain
