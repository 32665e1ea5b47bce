#include "worker/layers/tile_layer.hpp"

#include <algorithm>

#include "worker/layer_registry.hpp"

namespace pstrain {

Status TileLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  const caffe::TileParameter& p = param_.tile_param();
  if (!p.has_tiles() || p.tiles() < 1) {
    return Status::Error("tile_param.tiles must be set and positive, got " +
                         (p.has_tiles() ? std::to_string(p.tiles()) : std::string("none")));
  }
  const Blob& x = *bottom[0];
  if (p.axis() < -x.num_axes() || p.axis() >= x.num_axes()) {
    return Status::Error("tile_param.axis " + std::to_string(p.axis()) +
                         " is out of range for bottom 0 of shape " + x.shape_string());
  }
  const int axis = x.CanonicalAxisIndex(p.axis());
  std::vector<int> shape = x.shape();
  const int64_t tiled = static_cast<int64_t>(shape[axis]) * p.tiles();
  if (tiled * x.count(0, axis) * x.count(axis + 1) > context().max_blob_values) {
    return Status::Error("tile_param.tiles " + std::to_string(p.tiles()) + " makes a top of " +
                         std::to_string(tiled * x.count() / std::max(shape[axis], 1)) +
                         " values, more than the limit");
  }
  shape[axis] = static_cast<int>(tiled);
  top[0]->Reshape(shape);
  tiles_ = p.tiles();
  outer_ = x.count(0, axis);
  inner_ = x.count(axis);
  return Status::Ok();
}

void TileLayer::ForwardReference(const BlobVec& bottom, const BlobVec& top) {
  const float* x = bottom[0]->cpu_data();
  float* y = top[0]->mutable_cpu_data();
  for (int64_t o = 0; o < outer_; ++o) {
    for (int t = 0; t < tiles_; ++t) {
      std::copy(x + o * inner_, x + (o + 1) * inner_, y + (o * tiles_ + t) * inner_);
    }
  }
}

void TileLayer::BackwardReference(const BlobVec& top, const std::vector<bool>& propagate_down,
                                  const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  const float* dy = top[0]->cpu_diff();
  float* dx = bottom[0]->mutable_cpu_diff();
  for (int64_t o = 0; o < outer_; ++o) {
    for (int64_t k = 0; k < inner_; ++k) {
      float sum = 0.f;
      for (int t = 0; t < tiles_; ++t) sum += dy[(o * tiles_ + t) * inner_ + k];
      dx[o * inner_ + k] = sum;
    }
  }
}

PSTRAIN_REGISTER_LAYER("Tile", TileLayer);

}  // namespace pstrain
