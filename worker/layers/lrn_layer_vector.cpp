// LRN's "vector" implementation (ACROSS_CHANNELS): the layer's buffers handed
// to the kernels of lrn_cpu_kernels.hpp. Forward keeps scale (as the reference
// path does) and scale^-beta in power_ for Backward.
#include "worker/layers/lrn_cpu_kernels.hpp"
#include "worker/layers/lrn_layer.hpp"

namespace pstrain {
namespace {

LrnShape ShapeOf(int num, int channels, int height, int width, int size, float alpha, float beta,
                 float k) {
  LrnShape s;
  s.num = num;
  s.channels = channels;
  s.plane = static_cast<int64_t>(height) * width;
  s.size = size;
  s.alpha = alpha;
  s.beta = beta;
  s.k = k;
  return s;
}

}  // namespace

void LrnLayer::ForwardVector(const BlobVec& bottom, const BlobVec& top) {
  if (bottom[0]->count() == 0) return;
  LrnAcrossForward(ShapeOf(num_, channels_, height_, width_, size_, alpha_, beta_, k_),
                   bottom[0]->cpu_data(), scale_.mutable_cpu_data(), power_.mutable_cpu_data(),
                   top[0]->mutable_cpu_data());
}

// REQUIRES: ForwardVector ran last on these blobs (scale_ and power_ are its own).
void LrnLayer::BackwardVector(const BlobVec& top, const std::vector<bool>& propagate_down,
                              const BlobVec& bottom) {
  if (!propagate_down[0] || bottom[0]->count() == 0) return;
  LrnAcrossBackward(ShapeOf(num_, channels_, height_, width_, size_, alpha_, beta_, k_),
                    bottom[0]->cpu_data(), top[0]->cpu_data(), top[0]->cpu_diff(),
                    scale_.cpu_data(), power_.cpu_data(), bottom[0]->mutable_cpu_diff());
}

}  // namespace pstrain
