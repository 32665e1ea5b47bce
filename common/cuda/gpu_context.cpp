#include "common/cuda/gpu_context.hpp"

#include <atomic>
#include <string>

#include "common/cuda/cuda_check.hpp"

namespace pstrain {

GpuContext& GpuContext::ForThisThread() {
  thread_local GpuContext context;
  return context;
}

GpuContext::GpuContext() {
  int device = 0;
  if (cudaGetDevice(&device) == cudaSuccess) {
    device_ = device;
  } else {
    (void)cudaGetLastError();  // no device or driver: clear the error, keep device 0
  }
}

GpuContext::~GpuContext() { Release(); }

// Destroys streams and handles; errors are ignored because this also runs at
// thread exit, when the runtime may already be shutting down.
void GpuContext::Release() {
  if (stream_ == nullptr && copy_stream_ == nullptr && cublas_ == nullptr && cudnn_ == nullptr) {
    return;
  }
  (void)cudaSetDevice(device_);
  if (cudnn_ != nullptr) (void)cudnnDestroy(cudnn_);
  if (cublas_ != nullptr) (void)cublasDestroy(cublas_);
  if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
  if (copy_stream_ != nullptr) (void)cudaStreamDestroy(copy_stream_);
  cudnn_ = nullptr;
  cublas_ = nullptr;
  stream_ = nullptr;
  copy_stream_ = nullptr;
}

Status GpuContext::SelectDevice(int device) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return CudaStatus(err, "cannot select CUDA device " + std::to_string(device));
  }
  if (device < 0 || device >= count) {
    return Status::Error("CUDA device " + std::to_string(device) + " does not exist (" +
                         std::to_string(count) + " device" + (count == 1 ? "" : "s") + " visible)");
  }
  if (device != device_) {
    if (stream_ != nullptr) Synchronize();
    Release();
    device_ = device;
  }
  return CudaStatus(cudaSetDevice(device), "cudaSetDevice(" + std::to_string(device) + ")");
}

void GpuContext::MakeCurrent() { PSTRAIN_CUDA_CHECK(cudaSetDevice(device_)); }

cudaStream_t GpuContext::stream() {
  if (stream_ == nullptr) {
    MakeCurrent();
    PSTRAIN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamDefault));
  }
  return stream_;
}

cudaStream_t GpuContext::copy_stream() {
  if (copy_stream_ == nullptr) {
    MakeCurrent();
    PSTRAIN_CUDA_CHECK(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking));
  }
  return copy_stream_;
}

cublasHandle_t GpuContext::cublas() {
  if (cublas_ == nullptr) {
    cudaStream_t s = stream();
    PSTRAIN_CUBLAS_CHECK(cublasCreate(&cublas_));
    PSTRAIN_CUBLAS_CHECK(cublasSetStream(cublas_, s));
  }
  return cublas_;
}

cudnnHandle_t GpuContext::cudnn() {
  if (cudnn_ == nullptr) {
    cudaStream_t s = stream();
    PSTRAIN_CUDNN_CHECK(cudnnCreate(&cudnn_));
    PSTRAIN_CUDNN_CHECK(cudnnSetStream(cudnn_, s));
    static std::atomic<uint64_t> handles_made{0};
    cudnn_id_ = ++handles_made;
  }
  return cudnn_;
}

uint64_t GpuContext::cudnn_id() {
  cudnn();
  return cudnn_id_;
}

Status GpuContext::Finish(const std::string& what) {
  cudaError_t err = cudaStreamSynchronize(stream());
  // A launch error of a kernel that never ran is reported by the next call
  // that checks the thread's last error, not by the synchronisation.
  const cudaError_t last = cudaGetLastError();
  // cudaErrorNotReady (an event or stream query) reports no failure.
  if (err == cudaSuccess && last != cudaErrorNotReady) err = last;
  if (err == cudaSuccess) return Status::Ok();
  return CudaStatus(err, what + ": CUDA work on device " + std::to_string(device_) + " failed");
}

void GpuContext::Synchronize() {
  const Status s = Finish("waiting for the stream");
  if (!s.ok()) GpuCheckFailed(__FILE__, __LINE__, "GpuContext::Synchronize()", s.message());
}

void GpuContext::SynchronizeQuietly() {
  if (stream_ != nullptr) (void)cudaStreamSynchronize(stream_);
  (void)cudaGetLastError();
}

}  // namespace pstrain
