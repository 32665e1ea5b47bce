// Net::FuseLayers: layers that run as one under the fast and GPU engines
// (docs/architecture.md, "BatchNorm and Scale fused"). Which layer takes over
// which is the layers' own decision (Layer::TakeOver: BatchNorm takes a Scale
// and a ReLU, an Eltwise SUM a ReLU); this file only finds the in-place runs.
#include <cstdlib>
#include <string>

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

void Net::FuseLayers() {
  const int n = static_cast<int>(layers_.size());
  for (int i = 0; i + 1 < n; ++i) {
    if (top_ids_[i].empty()) continue;
    Blob* bottom = bottom_vecs_[i].empty() ? nullptr : bottom_vecs_[i][0];
    // The layers right after i, in place on its top, as long as i takes them.
    for (int next = i + 1; next < n && WorksInPlaceOn(i, next); ++next) {
      if (!layers_[i]->TakeOver(*layers_[next], bottom, top_vecs_[i][0])) break;
      layers_[next]->set_fused(true);
    }
  }
}

}  // namespace pstrain
