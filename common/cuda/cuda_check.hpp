// Error handling for CUDA, cuBLAS and cuDNN calls (CUDA builds only).
//
// Two kinds of failure, as everywhere in PSTrain:
//  - PSTRAIN_CUDA_CHECK / PSTRAIN_CUDNN_CHECK / PSTRAIN_CUBLAS_CHECK guard our
//    own invariants (a bad launch configuration, a descriptor we built
//    wrong): on failure they abort with file:line, the call's text and the
//    library's error name and string.
//  - CudaStatus / CublasStatus / CudnnStatus turn a result into a Status for
//    failures a caller can recover from or report (out of memory, a missing
//    device): "what: cudaErrorMemoryAllocation (out of memory)".
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <string>

#include "common/status.hpp"

namespace pstrain {

// "cudaErrorX (text)", "CUBLAS_STATUS_X (text)", "CUDNN_STATUS_X".
std::string CudaErrorText(cudaError_t err);
std::string CublasErrorText(cublasStatus_t status);
std::string CudnnErrorText(cudnnStatus_t status);

// Ok on success, otherwise an error "what: <library error text>".
Status CudaStatus(cudaError_t err, const std::string& what);
Status CublasStatus(cublasStatus_t status, const std::string& what);
Status CudnnStatus(cudnnStatus_t status, const std::string& what);

[[noreturn]] void GpuCheckFailed(const char* file, int line, const char* expr,
                                 const std::string& error);

}  // namespace pstrain

#define PSTRAIN_CUDA_CHECK(expr)                                                            \
  do {                                                                                      \
    const cudaError_t pstrain_cuda_err_ = (expr);                                           \
    if (pstrain_cuda_err_ != cudaSuccess) {                                                 \
      ::pstrain::GpuCheckFailed(__FILE__, __LINE__, #expr,                                  \
                                ::pstrain::CudaErrorText(pstrain_cuda_err_));               \
    }                                                                                       \
  } while (0)

#define PSTRAIN_CUBLAS_CHECK(expr)                                                          \
  do {                                                                                      \
    const cublasStatus_t pstrain_cublas_status_ = (expr);                                   \
    if (pstrain_cublas_status_ != CUBLAS_STATUS_SUCCESS) {                                  \
      ::pstrain::GpuCheckFailed(__FILE__, __LINE__, #expr,                                  \
                                ::pstrain::CublasErrorText(pstrain_cublas_status_));        \
    }                                                                                       \
  } while (0)

#define PSTRAIN_CUDNN_CHECK(expr)                                                           \
  do {                                                                                      \
    const cudnnStatus_t pstrain_cudnn_status_ = (expr);                                     \
    if (pstrain_cudnn_status_ != CUDNN_STATUS_SUCCESS) {                                    \
      ::pstrain::GpuCheckFailed(__FILE__, __LINE__, #expr,                                  \
                                ::pstrain::CudnnErrorText(pstrain_cudnn_status_));          \
    }                                                                                       \
  } while (0)

// After a kernel launch: aborts on a launch error (bad configuration, no
// kernel image for this device). Does not synchronise.
#define PSTRAIN_CUDA_KERNEL_CHECK() PSTRAIN_CUDA_CHECK(cudaPeekAtLastError())
