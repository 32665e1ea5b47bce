// Parameter on the GPU: the top shares the parameter's memory; nothing to run.
#include "worker/layers/parameter_layer.hpp"

namespace pstrain {

void ParameterLayer::ForwardGpu(const BlobVec&, const BlobVec&) {}
void ParameterLayer::BackwardGpu(const BlobVec&, const std::vector<bool>&, const BlobVec&) {}

}  // namespace pstrain
