// Owning wrappers of cuDNN descriptors for the layers' GPU paths (CUDA builds
// only: included by worker/layers/*.cu). Each wrapper creates its descriptor
// on construction and destroys it with itself; failures abort (they are
// broken invariants of our own code, never user input). Layers keep their
// descriptors as members, set for a shape in Reshape (or on the first call
// after it), never made per Forward/Backward call.
#pragma once

#include <cudnn.h>

#include <cstdint>

#include "common/cuda/cuda_check.hpp"

namespace pstrain {

// Descriptors the wrappers below have created in this process, all threads
// (for tests that check descriptors are reused across calls).
int64_t CudnnDescriptorsCreated();
void CountCudnnDescriptorCreated();

// The wrapper calls whatever Create/Destroy it is given; whether those are
// deprecated is decided (and silenced) where an alias names them, so the
// deprecation warning is off inside the template.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
template <typename Handle, cudnnStatus_t (*Create)(Handle*), cudnnStatus_t (*Destroy)(Handle)>
class CudnnDescriptor {
 public:
  CudnnDescriptor() {
    PSTRAIN_CUDNN_CHECK(Create(&handle_));
    CountCudnnDescriptorCreated();
  }
  ~CudnnDescriptor() { Destroy(handle_); }
  CudnnDescriptor(const CudnnDescriptor&) = delete;
  CudnnDescriptor& operator=(const CudnnDescriptor&) = delete;

  Handle get() const { return handle_; }

 private:
  Handle handle_;
};
#pragma GCC diagnostic pop

using CudnnTensor = CudnnDescriptor<cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor,
                                    cudnnDestroyTensorDescriptor>;
// Filter, convolution and pooling descriptors are deprecated in cuDNN 9;
// their aliases live in the files that use them (conv_layer.cu,
// pooling_layer.cu), inside those files' silenced LEGACY regions.
using CudnnLrn =
    CudnnDescriptor<cudnnLRNDescriptor_t, cudnnCreateLRNDescriptor, cudnnDestroyLRNDescriptor>;

// A dense float NCHW tensor descriptor.
inline void SetTensor4d(const CudnnTensor& tensor, int n, int c, int h, int w) {
  PSTRAIN_CUDNN_CHECK(
      cudnnSetTensor4dDescriptor(tensor.get(), CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, c, h, w));
}

// The scaling factors cuDNN takes by address.
inline const float* CudnnOne() {
  static const float one = 1.f;
  return &one;
}
inline const float* CudnnZero() {
  static const float zero = 0.f;
  return &zero;
}

}  // namespace pstrain
