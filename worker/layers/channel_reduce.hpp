// Per-channel reductions on the GPU (CUDA builds only; implemented in
// channel_reduce.cu, used by the layers' .cu files and tested directly by
// tests/cpp/gpu_reduce_test.cpp). Plain C++: no CUDA syntax, so host code
// and tests can include it. Pointers are device pointers; the work is queued
// on the calling thread's GpuContext stream.
#pragma once

#include <cstdint>

namespace pstrain {

// Per-channel sums over a [outer, dim, inner] array (channel d holds the
// outer * inner elements a[(o * dim + d) * inner + i]), implemented in
// channel_reduce.cu. Each channel is cut into chunks of consecutive (o, i)
// positions; one block sums a chunk in double (fixed order, 32-bit indexing
// when the array allows it), and a second pass adds a channel's chunk sums
// in order. The chunking depends only on the sizes, so results are the same
// from run to run and from GPU to GPU (deterministic, no atomics).
enum class ChannelTerm {
  kValue,             // a
  kProduct,           // a * b, the product in double
  kSquaredDeviation,  // (a - center[d])^2 in double
};
// Where a channel's total goes: total / divisor (total itself when
// divisor <= 0) in double to `exact`, as float to `values` (added to it with
// `accumulate`); either may be null.
struct ChannelSumOutput {
  double divisor = 1.0;
  float* values = nullptr;
  bool accumulate = false;
  double* exact = nullptr;
};
// REQUIRES: b set for kProduct, center (dim doubles, device) for
// kSquaredDeviation; outputs hold dim elements. A channel with no elements
// sums to 0. Queued on the thread's stream.
void GpuChannelReduce(int64_t outer, int64_t dim, int64_t inner, ChannelTerm term, const float* a,
                      const float* b, const double* center, const ChannelSumOutput& out);

// out[d] = sum over o and i of a[(o * dim + d) * inner + i] (times b at the
// same index when b is not null), through GpuChannelReduce; with
// `accumulate` the sum is added to out[d].
void GpuChannelSum(int64_t outer, int64_t dim, int64_t inner, const float* a, const float* b,
                   bool accumulate, float* out);

// Per-channel mean and biased variance of a [outer, dim, inner] array, the
// reference BatchNorm's arithmetic: mean in double, then the squared
// deviations from that double mean summed in double; both 0 for a channel
// without elements.
void GpuChannelMeanVariance(int64_t outer, int64_t dim, int64_t inner, const float* x, float* mean,
                            float* variance);

}  // namespace pstrain
