// Sigmoid on the GPU: its base's kernels with SigmoidMath, the reference's
// tanh form exactly.
#include "worker/layers/sigmoid_layer.hpp"
#include "worker/layers/top_only_activation_layer.cuh"

PSTRAIN_INSTANTIATE_TOP_ONLY_ACTIVATION_GPU(pstrain::SigmoidMath);
