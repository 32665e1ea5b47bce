// FactorProduct for generic (common/ps/factor_product/kernel.inc): 4 floats a
// vector, tiles of 2 vectors. Compiled with -ffp-contract=off.
#include <cstdint>
#include <cstring>

#include "common/ps/factor_product/variants.hpp"

#define PSTRAIN_FP_LANES 4
#define PSTRAIN_FP_VECTORS 2

namespace pstrain::factor_product::generic {
#include "common/ps/factor_product/kernel.inc"
}  // namespace pstrain::factor_product::generic
