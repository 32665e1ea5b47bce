#include "worker/layers/parameter_layer.hpp"

#include "worker/layer_registry.hpp"

namespace pstrain {

Status ParameterLayer::LayerSetUp(const BlobVec&, const BlobVec&) {
  if (!param_.parameter_param().has_shape()) {
    return Status::Error("Parameter needs parameter_param { shape { dim: ... } }");
  }
  if (!blobs_.empty()) return Status::Ok();  // given (loaded)
  PSTRAIN_ASSIGN_OR_RETURN(std::vector<int> shape,
                           ShapeFromProto(param_.parameter_param().shape()));
  int64_t count = 1;
  for (int d : shape) count *= d;
  if (count > context().max_blob_values) {
    return Status::Error("parameter_param.shape holds " + std::to_string(count) +
                         " values, more than the limit of " +
                         std::to_string(context().max_blob_values));
  }
  blobs_.push_back(std::make_shared<Blob>(shape));
  return Status::Ok();
}

Status ParameterLayer::Reshape(const BlobVec&, const BlobVec& top) {
  top[0]->ReshapeLike(*blobs_[0]);
  top[0]->ShareData(*blobs_[0]);
  top[0]->ShareDiff(*blobs_[0]);
  return Status::Ok();
}

// The top is the parameter: nothing to compute either way.
void ParameterLayer::ForwardReference(const BlobVec&, const BlobVec&) {}
void ParameterLayer::BackwardReference(const BlobVec&, const std::vector<bool>&, const BlobVec&) {}

PSTRAIN_REGISTER_LAYER("Parameter", ParameterLayer);

}  // namespace pstrain
