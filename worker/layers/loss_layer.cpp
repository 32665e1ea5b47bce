#include "worker/layers/loss_layer.hpp"

#include <cmath>
#include <sstream>

namespace pstrain {

Status LossLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  if (bottom[0]->num_axes() == 0 || bottom[1]->num_axes() == 0) {
    return Status::Error("loss inputs need at least one axis, got bottom 0 of shape " +
                         bottom[0]->shape_string() + " and bottom 1 of shape " +
                         bottom[1]->shape_string());
  }
  if (bottom[0]->shape(0) != bottom[1]->shape(0)) {
    return Status::Error(
        "the data and label should have the same first dimension, got bottom 0 "
        "of shape " +
        bottom[0]->shape_string() + " and bottom 1 of shape " + bottom[1]->shape_string());
  }
  top[0]->Reshape({});
  return Status::Ok();
}

caffe::LossParameter::NormalizationMode NormalizationMode(const caffe::LossParameter& param) {
  if (!param.has_normalization() && param.has_normalize()) {
    return param.normalize() ? caffe::LossParameter::VALID : caffe::LossParameter::BATCH_SIZE;
  }
  return param.normalization();
}

float LossNormalizer(caffe::LossParameter::NormalizationMode mode, int64_t outer, int64_t inner,
                     int64_t valid_count) {
  int64_t normalizer = 1;
  switch (mode) {
    case caffe::LossParameter::FULL:
      normalizer = outer * inner;
      break;
    case caffe::LossParameter::VALID:
      normalizer = valid_count;
      break;
    case caffe::LossParameter::BATCH_SIZE:
      normalizer = outer;
      break;
    case caffe::LossParameter::NONE:
      normalizer = 1;
      break;
  }
  return static_cast<float>(normalizer < 1 ? 1 : normalizer);
}

bool ReadLabel(float value, int* label) {
  // 2^31 is exactly representable; every float below it in magnitude fits in int.
  if (!(value > -2147483648.f && value < 2147483648.f)) return false;
  *label = static_cast<int>(value);
  return true;
}

std::string LabelOutOfRangeMessage(float value, int64_t index, int num_classes) {
  std::ostringstream out;
  out << "label " << value << " at index " << index << " of bottom 1 is outside [0, " << num_classes
      << ") and is not the ignore_label";
  return out.str();
}

Status CheckClassLabels(const Blob& labels, int num, int num_classes) {
  const float* label = labels.cpu_data();
  for (int n = 0; n < num; ++n) {
    int value = 0;
    if (!ReadLabel(label[n], &value) || value < 0 || value >= num_classes) {
      return Status::Error(LabelOutOfRangeMessage(label[n], n, num_classes));
    }
  }
  return Status::Ok();
}

}  // namespace pstrain
