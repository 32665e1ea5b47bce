// Sigmoid's formulas are in sigmoid_layer.hpp; the loops in its base,
// top_only_activation_layer.hpp.
#include "worker/layers/sigmoid_layer.hpp"

#include "worker/layer_registry.hpp"

namespace pstrain {

PSTRAIN_REGISTER_LAYER("Sigmoid", SigmoidLayer);

}  // namespace pstrain
