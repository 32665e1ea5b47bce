// Crop: Caffe's CropLayer. Crops bottom 0 to the shape of bottom 1 from
// crop_param.axis on (default 2: the spatial axes of N x C x H x W), starting
// at crop_param.offset along each cropped axis: no offset means 0 everywhere,
// one offset applies to every cropped axis, otherwise one per cropped axis.
// Axes before `axis` keep bottom 0's size. A crop that does not fit (offset +
// size past bottom 0's edge) is a set-up error. Only bottom 0 takes a
// gradient (zero outside the crop); bottom 1 gives only its shape.
#pragma once

#include <cstdint>
#include <vector>

#include "worker/layer.hpp"

namespace pstrain {

// The index map of a crop: top element i (with top strides) reads bottom
// element sum over axes of (index_a + offset_a) * bottom_stride_a.
struct CropGeometry {
  static constexpr int kMaxAxes = 32;  // Caffe's blob axis limit
  int num_axes = 0;
  int64_t top_stride[kMaxAxes] = {};
  int64_t bottom_stride[kMaxAxes] = {};
  int64_t offset[kMaxAxes] = {};
};

class CropLayer : public Layer {
 public:
  explicit CropLayer(const caffe::LayerParameter& param) : Layer(param) {}

  Status Reshape(const BlobVec& bottom, const BlobVec& top) override;
  const char* type() const override { return "Crop"; }
#ifdef PSTRAIN_HAVE_CUDA
  bool HasGpuPath() const override { return true; }
#endif
  int ExactNumBottomBlobs() const override { return 2; }
  int ExactNumTopBlobs() const override { return 1; }
  bool AllowForceBackward(int bottom_index) const override { return bottom_index == 0; }

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
  // Bottom index of top element `row_start`, the first of a row along the last axis.
  int64_t BottomRowStart(int64_t row_start) const;
  CropGeometry geo_;
};

}  // namespace pstrain
