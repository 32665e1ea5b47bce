// DataTransformer: Caffe's TransformationParameter applied to raw Datums.
//
// For each output element, in Caffe's DataTransformer order:
//   crop (TRAIN: random offset; TEST: centred), mirror (random flip of the
//   width axis), then out = (pixel - mean) * scale, where mean is the mean_file
//   value at the pixel's position in the uncropped image, or mean_value of the
//   channel, or 0. The random draws are, in order: mirror (only when mirror is
//   on), then the crop's height and width offsets (only for TRAIN crops).
// Validated once against the data's C x H x W at Create; Transform never fails.
#pragma once

#include <cstdint>
#include <vector>

#include "common/rng.hpp"
#include "common/status.hpp"
#include "proto/caffe.pb.h"

namespace pstrain {

class DataTransformer {
 public:
  // Errors: both mean_file and mean_value given; mean_value count neither 1
  // nor C; crop_size larger than H or W; an unreadable mean_file or one whose
  // shape is not 1 x C x H x W (the message names the file).
  static Result<DataTransformer> Create(const caffe::TransformationParameter& param,
                                        caffe::Phase phase, int channels, int height, int width);

  // {num, C, H', W'} with H' = W' = crop_size when cropping.
  std::vector<int> OutputShape(int num) const;
  int64_t output_count() const { return int64_t{channels_} * out_height_ * out_width_; }
  // True when Transform draws random numbers (mirror, or a TRAIN crop).
  bool NeedsRandom() const;

  // Writes output_count() floats to `out`.
  // REQUIRES: ParseDatum accepted `datum` and its shape is the one given at
  // Create; rng != nullptr when NeedsRandom().
  void Transform(const caffe::Datum& datum, Rng* rng, float* out) const;

 private:
  DataTransformer() = default;

  caffe::Phase phase_ = caffe::TRAIN;
  float scale_ = 1.f;
  bool mirror_ = false;
  int crop_size_ = 0;
  int channels_ = 0, height_ = 0, width_ = 0;
  int out_height_ = 0, out_width_ = 0;
  std::vector<float> mean_image_;    // C*H*W values from mean_file, or empty
  std::vector<float> mean_channel_;  // C values from mean_value, or empty
};

}  // namespace pstrain
