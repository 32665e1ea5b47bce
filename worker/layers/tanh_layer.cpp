// TanH's formulas are in tanh_layer.hpp; the loops in its base,
// top_only_activation_layer.hpp.
#include "worker/layers/tanh_layer.hpp"

#include "worker/layer_registry.hpp"

namespace pstrain {

PSTRAIN_REGISTER_LAYER("TanH", TanHLayer);

}  // namespace pstrain
