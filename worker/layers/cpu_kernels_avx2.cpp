// The pooling and LRN kernels compiled for avx2 (flags: -mavx2 -mfma, set in
// worker/CMakeLists.txt, with -fno-math-errno so square roots vectorise).
// Only the dispatchers in cpu_kernels_dispatch.cpp
// call into this namespace, and only when KernelIsa() names it.
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "worker/layers/cpu_kernels_variants.hpp"

namespace pstrain::avx2 {
#include "worker/layers/pooling_cpu_kernels.inc"
#include "worker/layers/lrn_cpu_kernels.inc"
}  // namespace pstrain::avx2
