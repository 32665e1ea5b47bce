#include "worker/layers/split_layer.hpp"

#include <string>

#include "common/math_cpu.hpp"
#include "worker/layer_registry.hpp"

namespace pstrain {

Status SplitLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  // A blob nothing has shaped yet (an Input without input_param.shape) has no
  // values to share (found by fuzz/fuzz_net_prototxt.cpp).
  if (bottom[0]->data_memory() == nullptr) {
    return Status::Error(
        "the bottom has no shape yet (an Input layer without input_param.shape "
        "feeds it)");
  }
  for (size_t i = 0; i < top.size(); ++i) {
    if (top[i] == bottom[0]) {
      return Status::Error("Split cannot run in place (top " + std::to_string(i) +
                           " is the bottom)");
    }
    top[i]->ReshapeLike(*bottom[0]);
    top[i]->ShareData(*bottom[0]);
  }
  return Status::Ok();
}

void SplitLayer::BackwardReference(const BlobVec& top, const std::vector<bool>& propagate_down,
                                   const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  const int64_t n = bottom[0]->count();
  float* dx = bottom[0]->mutable_cpu_diff();
  CpuCopy(n, top[0]->cpu_diff(), dx);
  for (size_t i = 1; i < top.size(); ++i) CpuAxpy(n, 1.f, top[i]->cpu_diff(), dx);
}

PSTRAIN_REGISTER_LAYER("Split", SplitLayer);

}  // namespace pstrain
