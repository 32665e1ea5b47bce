// Net::FuseLayers: layers that run as one under the fast and GPU engines
// (docs/architecture.md, "BatchNorm and Scale fused").
#include <cstdlib>
#include <string>

#include "worker/layers/batch_norm_layer.hpp"
#include "worker/layers/relu_layer.hpp"
#include "worker/layers/scale_layer.hpp"
#include "worker/net.hpp"

namespace pstrain {

bool LayerFusionEnabled() {
  const char* value = std::getenv("PSTRAIN_FUSE_LAYERS");
  if (value == nullptr) return true;
  const std::string text(value);
  return text != "0" && text != "false";
}

void Net::FuseLayers() {
  const int n = static_cast<int>(layers_.size());
  for (int i = 0; i + 1 < n; ++i) {
    auto* batch_norm = dynamic_cast<BatchNormLayer*>(layers_[i].get());
    auto* scale = dynamic_cast<ScaleLayer*>(layers_[i + 1].get());
    if (batch_norm == nullptr || scale == nullptr) continue;
    if (batch_norm->engine() != scale->engine() || batch_norm->loss(0) != 0.f) continue;
    // The Scale reads the BatchNorm's top and writes it back, nothing else.
    const int top = top_ids_[i][0];
    if (bottom_ids_[i + 1].size() != 1 || bottom_ids_[i + 1][0] != top ||
        top_ids_[i + 1].size() != 1 || top_ids_[i + 1][0] != top) {
      continue;
    }
    if (!scale->ScalesChannelsOf(*bottom_vecs_[i][0])) continue;
    batch_norm->FuseScale(scale, bottom_vecs_[i][0], top_vecs_[i][0]);
    scale->FuseInto(batch_norm);
    // A ReLU in place on the same blob right after (ResNet's pattern).
    if (i + 2 >= n) continue;
    auto* relu = dynamic_cast<ReLULayer*>(layers_[i + 2].get());
    if (relu == nullptr || relu->engine() != batch_norm->engine()) continue;
    if (bottom_ids_[i + 2].size() != 1 || bottom_ids_[i + 2][0] != top ||
        top_ids_[i + 2].size() != 1 || top_ids_[i + 2][0] != top) {
      continue;
    }
    batch_norm->FuseRelu(relu->layer_param().relu_param().negative_slope());
    relu->set_fused(true);
  }
}

}  // namespace pstrain
