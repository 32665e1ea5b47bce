#include "worker/layers/reshape_layer.hpp"

#include <limits>
#include <string>

#include "worker/layer_registry.hpp"

namespace pstrain {

Status ReshapeLayer::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  if (top[0] == bottom[0]) return Status::Error("Reshape cannot run in place");
  const caffe::BlobShape& shape = param_.reshape_param().shape();
  copy_axes_.clear();
  inferred_axis_ = -1;
  constant_count_ = 1;
  for (int i = 0; i < shape.dim_size(); ++i) {
    const int64_t dim = shape.dim(i);
    if (dim == 0) {
      copy_axes_.push_back(i);
    } else if (dim == -1) {
      if (inferred_axis_ >= 0) {
        return Status::Error("new shape has more than one -1 (dims " +
                             std::to_string(inferred_axis_) + " and " + std::to_string(i) + ")");
      }
      inferred_axis_ = i;
    } else if (dim < -1) {
      return Status::Error("new shape dim " + std::to_string(i) + " is " + std::to_string(dim) +
                           "; only -1 (infer) and 0 (copy) may be non-positive");
    } else if (dim > std::numeric_limits<int>::max()) {
      return Status::Error("new shape dim " + std::to_string(i) + " is " + std::to_string(dim) +
                           ", too large");
    } else {
      constant_count_ *= dim;
    }
  }
  return Status::Ok();
}

Status ReshapeLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  const caffe::ReshapeParameter& p = param_.reshape_param();
  const caffe::BlobShape& shape = p.shape();
  const Blob& in = *bottom[0];
  const int in_axes = in.num_axes();
  const int start = p.axis() >= 0 ? p.axis() : in_axes + p.axis() + 1;
  if (start < 0 || start > in_axes) {
    return Status::Error("axis " + std::to_string(p.axis()) +
                         " is out of range for bottom 0 of shape " + in.shape_string());
  }
  if (p.num_axes() < -1) {
    return Status::Error("num_axes must be >= 0, or -1 for all; got " +
                         std::to_string(p.num_axes()));
  }
  const int end = p.num_axes() == -1 ? in_axes : start + p.num_axes();
  if (end > in_axes) {
    return Status::Error("axis + num_axes = " + std::to_string(end) +
                         " is out of range for bottom 0 of shape " + in.shape_string());
  }
  std::vector<int> top_shape(in.shape().begin(), in.shape().begin() + start);
  for (int i = 0; i < shape.dim_size(); ++i) top_shape.push_back(static_cast<int>(shape.dim(i)));
  top_shape.insert(top_shape.end(), in.shape().begin() + end, in.shape().end());
  if (top_shape.size() > static_cast<size_t>(Blob::kMaxAxes)) {
    return Status::Error("new shape has " + std::to_string(top_shape.size()) + " axes, more than " +
                         std::to_string(Blob::kMaxAxes));
  }
  int64_t explicit_count = constant_count_ * in.count(0, start) * in.count(end);
  for (int i : copy_axes_) {
    if (start + i >= in_axes) {
      return Status::Error("new shape dim " + std::to_string(i) + " is 0 but bottom 0 of shape " +
                           in.shape_string() + " has no axis there to copy");
    }
    top_shape[start + i] = in.shape(start + i);
    explicit_count *= in.shape(start + i);
  }
  if (inferred_axis_ >= 0) {
    if (explicit_count == 0 || in.count() % explicit_count != 0) {
      return Status::Error("bottom count " + std::to_string(in.count()) +
                           " is not a multiple of the given dims' product " +
                           std::to_string(explicit_count) + "; cannot infer the -1 dim");
    }
    top_shape[start + inferred_axis_] = static_cast<int>(in.count() / explicit_count);
  }
  int64_t top_count = 1;
  for (int d : top_shape) top_count *= d;
  if (top_count != in.count()) {
    return Status::Error("new shape " + ShapeString(top_shape) + " does not match bottom 0 " +
                         in.shape_string() + " in count");
  }
  top[0]->Reshape(top_shape);
  top[0]->ShareData(in);
  top[0]->ShareDiff(in);
  return Status::Ok();
}

PSTRAIN_REGISTER_LAYER("Reshape", ReshapeLayer);

}  // namespace pstrain
