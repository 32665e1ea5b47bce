#include "common/cuda/device_allocator.hpp"

#include <cuda_runtime.h>

#include <bit>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/cuda/cuda_check.hpp"
#include "common/cuda/gpu_context.hpp"

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
  DeviceMemoryStats stats;
};

DeviceCache& Cache() {
  static DeviceCache* cache = new DeviceCache;
  return *cache;
}

std::string SizeText(size_t bytes) {
  char mib[32];
  std::snprintf(mib, sizeof(mib), "%.1f", static_cast<double>(bytes) / (1 << 20));
  return std::to_string(bytes) + " bytes (" + mib + " MiB)";
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
    return CudaStatus(
        err, "cannot allocate " + SizeText(bytes) + " on CUDA device " + std::to_string(device));
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
  if (block.freed == nullptr) {
    PSTRAIN_CUDA_CHECK(cudaEventCreateWithFlags(&block.freed, cudaEventDisableTiming));
  }
  PSTRAIN_CUDA_CHECK(cudaEventRecord(block.freed, block.stream));
  std::lock_guard<std::mutex> lock(cache.mu);
  cache.free[{block.device, block.bytes}].emplace_back(ptr, block);
  cache.stats.in_use_bytes -= static_cast<int64_t>(block.bytes);
  cache.stats.cached_bytes += static_cast<int64_t>(block.bytes);
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
    return CudaStatus(err, "cannot allocate " + SizeText(bytes) + " of pinned host memory");
  }
  return ptr;
}

void PinnedFree(void* ptr) {
  if (ptr != nullptr) PSTRAIN_CUDA_CHECK(cudaFreeHost(ptr));
}

}  // namespace pstrain
