#include "worker/layers/input_layer.hpp"

#include "worker/layer_registry.hpp"

namespace pstrain {

Status InputLayer::LayerSetUp(const BlobVec& /*bottom*/, const BlobVec& top) {
  const caffe::InputParameter& p = param_.input_param();
  const int num_top = static_cast<int>(top.size());
  const int num_shape = p.shape_size();
  if (num_shape != 0 && num_shape != 1 && num_shape != num_top) {
    return Status::Error("input_param.shape must be given once, once per top, or not at all: " +
                         std::to_string(num_top) + " tops, " + std::to_string(num_shape) +
                         " shapes");
  }
  if (num_shape == 0) return Status::Ok();
  for (int i = 0; i < num_top; ++i) {
    PSTRAIN_ASSIGN_OR_RETURN(std::vector<int> shape,
                             ShapeFromProto(p.shape(num_shape == 1 ? 0 : i)));
    top[i]->Reshape(shape);
  }
  return Status::Ok();
}

PSTRAIN_REGISTER_LAYER("Input", InputLayer);

}  // namespace pstrain
