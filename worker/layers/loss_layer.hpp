// LossLayer: what Caffe's loss layers share.
//
// A loss layer takes predictions (bottom 0) and targets (bottom 1), produces a
// scalar loss in top 0 (shape {}: no axes, count 1) and gets a default loss
// weight of 1 on that top. Backward scales bottom gradients by the loss weight
// the net leaves in top[0]->cpu_diff()[0]. Targets (bottom 1) take no gradient
// unless a subclass says otherwise.
//
// Also here: the normalisation rule of LossParameter and the reading of class
// labels stored as floats, shared with AccuracyLayer.
#pragma once

#include <cstdint>
#include <string>

#include "worker/layer.hpp"

namespace pstrain {

class LossLayer : public Layer {
 public:
  using Layer::Layer;

  int ExactNumBottomBlobs() const override { return 2; }
  int ExactNumTopBlobs() const override { return 1; }
  bool AutoTopBlobs() const override { return true; }
  bool IsLoss() const override { return true; }
  bool AllowForceBackward(int bottom_index) const override { return bottom_index != 1; }

  // Checks that both bottoms have at least one axis and the same first
  // dimension, then makes top 0 a scalar. Subclasses call it first.
  Status Reshape(const BlobVec& bottom, const BlobVec& top) override;
};

// The normalisation mode of a LossParameter: `normalization` when set, else
// the legacy `normalize` (true: VALID, false: BATCH_SIZE) when set, else VALID.
caffe::LossParameter::NormalizationMode NormalizationMode(const caffe::LossParameter& param);

// What a summed loss over outer x inner outputs, of which valid_count were not
// ignored, is divided by: FULL outer*inner, VALID valid_count, BATCH_SIZE
// outer, NONE 1; never less than 1.
float LossNormalizer(caffe::LossParameter::NormalizationMode mode, int64_t outer, int64_t inner,
                     int64_t valid_count);

// Reads a class label stored as a float (truncated toward zero, as Caffe's
// static_cast<int>). Returns false when the value is not a finite number in
// int range; then *label is untouched.
bool ReadLabel(float value, int* label);

// Message for a label outside [0, num_classes) that is not the ignore label.
std::string LabelOutOfRangeMessage(float value, int64_t index, int num_classes);

// The first of the `num` class labels in `labels` that is not a whole number in
// [0, num_classes) (no ignore label), as an error; Ok when every one is.
Status CheckClassLabels(const Blob& labels, int num, int num_classes);

}  // namespace pstrain
