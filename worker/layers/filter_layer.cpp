#include "worker/layers/filter_layer.hpp"

#include <algorithm>

#include "worker/layer_registry.hpp"

namespace pstrain {

Status FilterLayer::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  if (top.size() + 1 != bottom.size()) {
    return Status::Error(
        "Filter layer needs one top per filtered bottom (bottoms but the last, "
        "the selector): " +
        std::to_string(bottom.size() - 1) + " to filter, got " + std::to_string(top.size()) +
        " tops");
  }
  num_bottoms_ = static_cast<int>(bottom.size());
  first_reshape_ = true;
  return Status::Ok();
}

Status FilterLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  const Blob& selector = *bottom.back();
  const int last = static_cast<int>(bottom.size()) - 1;
  if (selector.num_axes() < 1) {
    return Status::Error("bottom " + std::to_string(last) +
                         " (the selector) needs an axis 0, got shape " + selector.shape_string());
  }
  for (int a = 1; a < selector.num_axes(); ++a) {
    if (selector.shape(a) != 1) {
      return Status::Error("bottom " + std::to_string(last) +
                           " (the selector) must have one value per sample (every axis after "
                           "the first 1), got shape " +
                           selector.shape_string());
    }
  }
  for (int k = 0; k < last; ++k) {
    if (bottom[k]->num_axes() < 1 || bottom[k]->shape(0) != selector.shape(0)) {
      return Status::Error("bottom " + std::to_string(k) + " of shape " +
                           bottom[k]->shape_string() + " must have the selector's " +
                           std::to_string(selector.shape(0)) + " samples along axis 0");
    }
  }
  if (first_reshape_) {
    first_reshape_ = false;
    kept_.resize(static_cast<size_t>(selector.shape(0)));
    for (size_t n = 0; n < kept_.size(); ++n) kept_[n] = static_cast<int>(n);
    ShapeTops(bottom, top, selector.shape(0));
    return Status::Ok();
  }
  Select(bottom, top);
  return Status::Ok();
}

void FilterLayer::ShapeTops(const BlobVec& bottom, const BlobVec& top, int samples) const {
  for (size_t k = 0; k < top.size(); ++k) {
    std::vector<int> shape = bottom[k]->shape();
    shape[0] = samples;
    top[k]->Reshape(shape);
  }
}

void FilterLayer::Select(const BlobVec& bottom, const BlobVec& top) {
  const Blob& selector = *bottom.back();
  const float* s = selector.cpu_data();
  kept_.clear();
  for (int n = 0; n < selector.shape(0); ++n) {
    if (s[n] != 0.f) kept_.push_back(n);
  }
  ShapeTops(bottom, top, static_cast<int>(kept_.size()));
}

void FilterLayer::ForwardReference(const BlobVec& bottom, const BlobVec& top) {
  Select(bottom, top);
  for (size_t k = 0; k < top.size(); ++k) {
    const int64_t inner = bottom[k]->count(1);
    const float* x = bottom[k]->cpu_data();
    float* y = top[k]->mutable_cpu_data();
    for (size_t i = 0; i < kept_.size(); ++i) {
      const float* src = x + kept_[i] * inner;
      std::copy(src, src + inner, y + static_cast<int64_t>(i) * inner);
    }
  }
}

void FilterLayer::BackwardReference(const BlobVec& top, const std::vector<bool>& propagate_down,
                                    const BlobVec& bottom) {
  for (size_t k = 0; k < top.size(); ++k) {
    if (!propagate_down[k]) continue;
    const int64_t inner = bottom[k]->count(1);
    const float* dy = top[k]->cpu_diff();
    float* dx = bottom[k]->mutable_cpu_diff();
    std::fill(dx, dx + bottom[k]->count(), 0.f);
    for (size_t i = 0; i < kept_.size(); ++i) {
      const float* src = dy + static_cast<int64_t>(i) * inner;
      std::copy(src, src + inner, dx + kept_[i] * inner);
    }
  }
}

PSTRAIN_REGISTER_LAYER("Filter", FilterLayer);

}  // namespace pstrain
