// Tile: repeats the bottom tile_param.tiles times (required, positive) along
// tile_param.axis (default 1): the top's dimension `axis` is tiles times the
// bottom's, each block of axes axis.. copied whole. The gradient sums the
// copies.
#pragma once

#include <vector>

#include "worker/layer.hpp"

namespace pstrain {

class TileLayer : public Layer {
 public:
  using Layer::Layer;

  const char* type() const override { return "Tile"; }
#ifdef PSTRAIN_HAVE_CUDA
  bool HasGpuPath() const override { return true; }
#endif
  Status Reshape(const BlobVec& bottom, const BlobVec& top) override;
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }

 protected:
  void ForwardReference(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardReference(const BlobVec& top, const std::vector<bool>& propagate_down,
                         const BlobVec& bottom) override;
#ifdef PSTRAIN_HAVE_CUDA
  void ForwardGpu(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom) override;
#endif

 private:
  int tiles_ = 1;
  int64_t outer_ = 0;  // count(0, axis)
  int64_t inner_ = 0;  // count(axis): one block
};

}  // namespace pstrain
