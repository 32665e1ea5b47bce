// The algorithm filter of the cuDNN convolutions: see cudnn_algo_filter.hpp.
#include "worker/layers/cudnn_algo_filter.hpp"

namespace pstrain {

ConvAlgoList FilterConvAlgorithms(const std::vector<ConvAlgoCandidate>& measured,
                                  size_t workspace_limit, bool allow_nondeterministic) {
  ConvAlgoList kept;
  for (const ConvAlgoCandidate& c : measured) {
    if (!c.succeeded || c.workspace > workspace_limit || c.tensor_op_math) continue;
    if (!c.deterministic && !allow_nondeterministic) continue;
    kept.push_back({c.algo, c.workspace, c.deterministic});
  }
  return kept;
}

}  // namespace pstrain
