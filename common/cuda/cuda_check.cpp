#include "common/cuda/cuda_check.hpp"

#include <cstdio>
#include <cstdlib>

namespace pstrain {

std::string CudaErrorText(cudaError_t err) {
  return std::string(cudaGetErrorName(err)) + " (" + cudaGetErrorString(err) + ")";
}

std::string CublasErrorText(cublasStatus_t status) {
  return cublasGetStatusName(status) + std::string(" (") + cublasGetStatusString(status) + ")";
}

std::string CudnnErrorText(cudnnStatus_t status) { return cudnnGetErrorString(status); }

Status CudaStatus(cudaError_t err, const std::string& what) {
  if (err == cudaSuccess) return Status::Ok();
  return Status::Error(what + ": " + CudaErrorText(err));
}

Status CublasStatus(cublasStatus_t status, const std::string& what) {
  if (status == CUBLAS_STATUS_SUCCESS) return Status::Ok();
  return Status::Error(what + ": " + CublasErrorText(status));
}

Status CudnnStatus(cudnnStatus_t status, const std::string& what) {
  if (status == CUDNN_STATUS_SUCCESS) return Status::Ok();
  return Status::Error(what + ": " + CudnnErrorText(status));
}

void GpuCheckFailed(const char* file, int line, const char* expr, const std::string& error) {
  std::fprintf(stderr, "pstrain: internal error at %s:%d: %s failed: %s\n", file, line, expr,
               error.c_str());
  std::abort();
}

}  // namespace pstrain
