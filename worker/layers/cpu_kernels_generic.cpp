// The pooling and LRN kernels compiled for generic (flags: none (the build's baseline, SSE2 on x86-64), set in
// worker/CMakeLists.txt, with -fno-math-errno so square roots vectorise).
// Only the dispatchers in cpu_kernels_dispatch.cpp
// call into this namespace, and only when KernelIsa() names it.
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "worker/layers/cpu_kernels_variants.hpp"

namespace pstrain::generic {
#include "worker/layers/pooling_cpu_kernels.inc"
#include "worker/layers/lrn_cpu_kernels.inc"
}  // namespace pstrain::generic
