// TanH on the GPU: its base's kernels with TanHMath.
#include "worker/layers/tanh_layer.hpp"
#include "worker/layers/top_only_activation_layer.cuh"

PSTRAIN_INSTANTIATE_TOP_ONLY_ACTIVATION_GPU(pstrain::TanHMath);
