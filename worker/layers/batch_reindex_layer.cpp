#include "worker/layers/batch_reindex_layer.hpp"

#include <algorithm>
#include <sstream>

#include "worker/layer_registry.hpp"

namespace pstrain {

Status BatchReindexLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  const Blob& x = *bottom[0];
  if (x.num_axes() < 1) {
    return Status::Error("bottom 0 must have an axis 0 to reindex, got shape " + x.shape_string());
  }
  if (bottom[1]->num_axes() != 1) {
    return Status::Error("bottom 1 (the indices) must have exactly one axis, got shape " +
                         bottom[1]->shape_string());
  }
  num_ = x.shape(0);
  picks_ = bottom[1]->shape(0);
  inner_ = x.count(1);
  std::vector<int> shape = x.shape();
  shape[0] = static_cast<int>(picks_);
  top[0]->Reshape(shape);
  return Status::Ok();
}

void BatchReindexLayer::CheckIndices(const Blob& indices) {
  const float* index = indices.cpu_data();
  last_error_ = Status::Ok();
  for (int64_t k = 0; k < picks_; ++k) {
    if (index[k] >= 0.f && index[k] < static_cast<float>(num_)) continue;
    std::ostringstream out;
    out << "index " << index[k] << " at position " << k << " of bottom 1 is outside [0, " << num_
        << "), the samples of bottom 0";
    last_error_ = Status::Error(out.str());
    return;
  }
}

void BatchReindexLayer::ForwardReference(const BlobVec& bottom, const BlobVec& top) {
  CheckIndices(*bottom[1]);
  const float* x = bottom[0]->cpu_data();
  const float* index = bottom[1]->cpu_data();
  float* y = top[0]->mutable_cpu_data();
  for (int64_t k = 0; k < picks_; ++k) {
    float* row = y + k * inner_;
    if (index[k] >= 0.f && index[k] < static_cast<float>(num_)) {
      const float* src = x + static_cast<int64_t>(index[k]) * inner_;
      std::copy(src, src + inner_, row);
    } else {
      std::fill(row, row + inner_, 0.f);
    }
  }
}

void BatchReindexLayer::BackwardReference(const BlobVec& top,
                                          const std::vector<bool>& propagate_down,
                                          const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  const float* index = bottom[1]->cpu_data();
  const float* dy = top[0]->cpu_diff();
  float* dx = bottom[0]->mutable_cpu_diff();
  std::fill(dx, dx + bottom[0]->count(), 0.f);
  for (int64_t k = 0; k < picks_; ++k) {
    if (!(index[k] >= 0.f && index[k] < static_cast<float>(num_))) continue;
    float* row = dx + static_cast<int64_t>(index[k]) * inner_;
    for (int64_t j = 0; j < inner_; ++j) row[j] += dy[k * inner_ + j];
  }
}

PSTRAIN_REGISTER_LAYER("BatchReindex", BatchReindexLayer);

}  // namespace pstrain
