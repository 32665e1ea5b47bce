#include "worker/layers/flatten_layer.hpp"

#include <string>

#include "worker/layer_registry.hpp"

namespace pstrain {

Status FlattenLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  if (top[0] == bottom[0]) return Status::Error("Flatten cannot run in place");
  const caffe::FlattenParameter& p = param_.flatten_param();
  const int num_axes = bottom[0]->num_axes();
  for (int axis : {p.axis(), p.end_axis()}) {
    if (axis < -num_axes || axis >= num_axes) {
      return Status::Error("axis " + std::to_string(axis) +
                           " is out of range for bottom 0 of shape " + bottom[0]->shape_string());
    }
  }
  const int start = p.axis() < 0 ? p.axis() + num_axes : p.axis();
  const int end = p.end_axis() < 0 ? p.end_axis() + num_axes : p.end_axis();
  if (end < start) {
    return Status::Error("end_axis " + std::to_string(p.end_axis()) + " comes before axis " +
                         std::to_string(p.axis()) + " in bottom 0 of shape " +
                         bottom[0]->shape_string());
  }
  const std::vector<int>& shape = bottom[0]->shape();
  std::vector<int> top_shape(shape.begin(), shape.begin() + start);
  top_shape.push_back(static_cast<int>(bottom[0]->count(start, end + 1)));
  top_shape.insert(top_shape.end(), shape.begin() + end + 1, shape.end());
  top[0]->Reshape(top_shape);
  top[0]->ShareData(*bottom[0]);
  top[0]->ShareDiff(*bottom[0]);
  return Status::Ok();
}

PSTRAIN_REGISTER_LAYER("Flatten", FlattenLayer);

}  // namespace pstrain
