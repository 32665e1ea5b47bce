// Net::FuseLayers: layers that run as one under the fast and GPU engines
// (docs/architecture.md, "BatchNorm and Scale fused").
#include <cstdlib>
#include <string>

#include "worker/layers/batch_norm_layer.hpp"
#include "worker/layers/eltwise_layer.hpp"
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

// True when layer `next` reads the first top of layer `i` and writes it
// back in place (one bottom, one top, nothing else), under the same engine.
bool Net::WorksInPlaceOn(int i, int next) const {
  if (layers_[next]->engine() != layers_[i]->engine()) return false;
  const int top = top_ids_[i][0];
  return bottom_ids_[next].size() == 1 && bottom_ids_[next][0] == top &&
         top_ids_[next].size() == 1 && top_ids_[next][0] == top;
}

bool Net::ReluInPlaceOn(int i, int next) const {
  return dynamic_cast<ReLULayer*>(layers_[next].get()) != nullptr && WorksInPlaceOn(i, next);
}

void Net::FuseLayers() {
  const int n = static_cast<int>(layers_.size());
  for (int i = 0; i + 1 < n; ++i) {
    // An Eltwise SUM and the ReLU on its top (the CPU engine only: on the GPU
    // it would save one element-wise kernel's traffic).
    auto* sum = dynamic_cast<EltwiseLayer*>(layers_[i].get());
    if (sum != nullptr && sum->Sums() && sum->engine() == Engine::kFast &&
        ReluInPlaceOn(i, i + 1)) {
      sum->FuseRelu(layers_[i + 1]->layer_param().relu_param().negative_slope());
      layers_[i + 1]->set_fused(true);
      continue;
    }
    auto* batch_norm = dynamic_cast<BatchNormLayer*>(layers_[i].get());
    auto* scale = dynamic_cast<ScaleLayer*>(layers_[i + 1].get());
    if (batch_norm == nullptr || scale == nullptr || batch_norm->loss(0) != 0.f) continue;
    if (!WorksInPlaceOn(i, i + 1) || !scale->ScalesChannelsOf(*bottom_vecs_[i][0])) continue;
    batch_norm->FuseScale(scale, bottom_vecs_[i][0], top_vecs_[i][0]);
    scale->FuseInto(batch_norm);
    // A ReLU in place on the same blob right after (ResNet's pattern).
    if (i + 2 >= n || !ReluInPlaceOn(i, i + 2)) continue;
    batch_norm->FuseRelu(layers_[i + 2]->layer_param().relu_param().negative_slope());
    layers_[i + 2]->set_fused(true);
  }
}

}  // namespace pstrain
