// LRN's own vectorised CPU kernels (LrnLayer's "vector" implementation) for
// ACROSS_CHANNELS on NCHW floats, Caffe's formula (lrn_layer.hpp):
//   scale = k + alpha/n * sum of x^2 over the n channels centred on c (clipped)
//   top = x * scale^-beta
// The window sums run along the spatial dimension (blocks of a few hundred
// positions, all channels of a sample at a time, so the block stays in
// cache); each sum adds the same terms in the reference's order. The power
// scale^-beta is kept for Backward (beta 0.75, 0.5 and 1 by square roots and
// a division, a few ulp from powf; other betas by powf). Blocks are spread over
// OpenMP threads (SetCpuThreads). Variants per ISA: cpu_kernel_isa.hpp.
#pragma once

#include <cstdint>

namespace pstrain {

struct LrnShape {
  int num = 0, channels = 0;
  int64_t plane = 0;  // height * width
  int size = 5;       // n, odd
  float alpha = 1.f;  // alpha / n
  float beta = 0.75f;
  float k = 1.f;
};

// REQUIRES: every buffer holds num * channels * plane floats; none aliases another.
void LrnAcrossForward(const LrnShape& shape, const float* x, float* scale, float* power,
                      float* top);
// REQUIRES: scale and power as the last LrnAcrossForward left them for x and top.
void LrnAcrossBackward(const LrnShape& shape, const float* x, const float* top,
                       const float* top_diff, const float* scale, const float* power,
                       float* bottom_diff);

}  // namespace pstrain
