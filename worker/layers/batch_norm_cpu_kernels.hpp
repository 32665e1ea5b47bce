// BatchNorm followed by a per-channel Scale, as one pass per direction: the
// CPU kernels of the fused pair (docs/architecture.md, "BatchNorm and Scale
// fused"), on N x C x spatial float blobs.
//
// Forward: with batch statistics, each channel's mean and biased variance
// (summed in double, the deviations from the double mean in a second pass:
// the reference's arithmetic, in another order); then, per element,
//   x_norm = (x - mean) / sd,   sd = sqrt(variance + eps)
//   y      = x_norm * gamma + beta          (beta 0 when null)
// Backward: per channel, in double, S = sum dy and P = sum dy * x_norm;
//   gamma_diff += P, beta_diff += S         (each when not null)
//   dx = gamma / sd * (dy - S / m - P / m * x_norm)   (batch statistics)
//   dx = gamma / sd * dy                               (global statistics)
// with m = N * spatial; this is Scale's backward followed by BatchNorm's.
// Channels are spread over OpenMP threads (SetCpuThreads); each channel's
// passes follow one another while its values are still in cache. Variants
// per ISA: cpu_kernel_isa.hpp.
#pragma once

#include <cstdint>

namespace pstrain {

struct BnShape {
  int64_t num = 0, channels = 0, spatial = 0;
};

// REQUIRES: x, x_norm, y hold num * channels * spatial floats (y may alias x);
// gamma, mean, variance, sd hold `channels`; beta is null or holds `channels`.
// With batch_stats, mean and variance are written; otherwise read.
void BnScaleForward(const BnShape& shape, bool batch_stats, float eps, const float* x,
                    const float* gamma, const float* beta, float* mean, float* variance, float* sd,
                    float* x_norm, float* y);
// REQUIRES: x_norm and sd as the last BnScaleForward left them; dy, x_norm
// and dx hold num * channels * spatial floats (dx may alias dy); gamma_diff,
// beta_diff and dx may each be null (not wanted).
void BnScaleBackward(const BnShape& shape, bool batch_stats, const float* dy, const float* x_norm,
                     const float* gamma, const float* sd, float* gamma_diff, float* beta_diff,
                     float* dx);

}  // namespace pstrain
