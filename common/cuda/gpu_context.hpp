// GpuContext: the CUDA state one thread works with (CUDA builds only).
//
// Each thread has its own context (ForThisThread): a device, a compute stream
// that every PSTrain kernel, copy, cuBLAS and cuDNN call of the thread runs
// on, a side stream for transfers that overlap compute, and cuBLAS and cuDNN
// handles bound to the compute stream. Streams and handles are created
// lazily on the context's device, on first use, so a thread that never
// touches the GPU creates nothing. One worker process drives one GPU
// (CUDA_VISIBLE_DEVICES), so device() is normally 0.
//
// stream() is a blocking stream: work on the legacy default stream (a plain
// cudaMemcpy) is ordered with it. copy_stream() is non-blocking: order it
// with stream() through events. Not thread-safe; only the owning thread uses
// its context.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <cstdint>
#include <string>

#include "common/status.hpp"

namespace pstrain {

class GpuContext {
 public:
  static GpuContext& ForThisThread();

  ~GpuContext();
  GpuContext(const GpuContext&) = delete;
  GpuContext& operator=(const GpuContext&) = delete;

  // The device this thread works on (the CUDA runtime's current device when
  // the context was made, 0 without a device).
  int device() const { return device_; }
  // Makes `device` this thread's device (cudaSetDevice). Streams and handles
  // made on another device are released first (after their work finished).
  // Errors name the device and how many exist.
  Status SelectDevice(int device);

  cudaStream_t stream();
  cudaStream_t copy_stream();
  cublasHandle_t cublas();
  cudnnHandle_t cudnn();
  // A number no other cuDNN handle of this process has had (handles are
  // made again after SelectDevice; an address may be reused): for caches of
  // things that run only on the handle they were made with.
  uint64_t cudnn_id();

  // Blocks until all work queued on stream() has finished. A failure of that
  // work (a kernel that faulted, a failed copy, a launch error not reported
  // yet) is "<what>: CUDA work on device N failed: <CUDA's error>". Kernels
  // are launched without waiting, so their errors surface here: callers that
  // wait anyway (the trainer's snapshots and end, the server's step, the
  // gradient copies) check through Finish.
  Status Finish(const std::string& what);
  // As Finish, for callers that cannot return a Status (SyncedMemory's
  // downloads): a failure aborts with that message, a broken invariant of
  // our kernels or the device.
  void Synchronize();
  // Waits and clears any error without reporting it: for destructors, which
  // may run while a device failure is being reported.
  void SynchronizeQuietly();

 private:
  GpuContext();
  void MakeCurrent();
  void Release();

  int device_ = 0;
  cudaStream_t stream_ = nullptr;
  cudaStream_t copy_stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  cudnnHandle_t cudnn_ = nullptr;
  uint64_t cudnn_id_ = 0;
};

}  // namespace pstrain
