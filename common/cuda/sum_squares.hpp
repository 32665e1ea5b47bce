// The gradient clipping norm on the device (CUDA builds only): the GPU twin
// of optim::SumSquares (common/optim/update_rule.hpp). The update rules' GPU
// kernels live beside their CPU rules in common/optim (<rule>.cu).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace pstrain::optim {

// *device_sum += SumSquares(x, n), summed in double on the device and queued
// on `stream`: the clipping norm without downloading the gradients. Agrees
// with the CPU sum to rounding (another order of addition).
// REQUIRES: x holds n floats and device_sum one double, both device memory.
void AddSumSquaresGpu(const float* x, size_t n, double* device_sum, cudaStream_t stream);

}  // namespace pstrain::optim
