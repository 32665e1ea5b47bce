#include "worker/layers/hdf5_output_layer.hpp"

#include "worker/data/hdf5_file.hpp"
#include "worker/layer_registry.hpp"

namespace pstrain {
namespace {

std::vector<int> LegacyShape(const Blob& blob) {
  return {blob.LegacyShape(0), blob.LegacyShape(1), blob.LegacyShape(2), blob.LegacyShape(3)};
}

}  // namespace

Hdf5OutputLayer::Hdf5OutputLayer(const caffe::LayerParameter& param) : Layer(param) {}
Hdf5OutputLayer::~Hdf5OutputLayer() = default;

Status Hdf5OutputLayer::LayerSetUp(const BlobVec& /*bottom*/, const BlobVec& /*top*/) {
  const std::string& file = param_.hdf5_output_param().file_name();
  if (file.empty()) return Status::InvalidArgument("hdf5_output_param.file_name must be given");
  writer_.reset();
  PSTRAIN_ASSIGN_OR_RETURN(writer_, Hdf5AppendWriter::Create(file));
  rows_ = 0;
  status_ = Status::Ok();
  return Status::Ok();
}

Status Hdf5OutputLayer::Reshape(const BlobVec& bottom, const BlobVec& /*top*/) {
  for (int i = 0; i < 2; ++i) {
    if (bottom[i]->num_axes() < 1 || bottom[i]->num_axes() > 4) {
      return Status::InvalidArgument("bottom " + std::to_string(i) + " of shape " +
                                     bottom[i]->shape_string() +
                                     ": HDF5Output writes blobs of 1 to 4 axes (Caffe's num, "
                                     "channels, height, width)");
    }
  }
  if (bottom[0]->shape(0) != bottom[1]->shape(0)) {
    return Status::InvalidArgument("data (bottom 0, " + bottom[0]->shape_string() +
                                   ") and label (bottom 1, " + bottom[1]->shape_string() +
                                   ") must have the same batch size");
  }
  return Status::Ok();
}

void Hdf5OutputLayer::ForwardReference(const BlobVec& bottom, const BlobVec& /*top*/) {
  if (!status_.ok()) return;
  status_ = writer_->Append("data", LegacyShape(*bottom[0]), bottom[0]->cpu_data());
  if (status_.ok()) {
    status_ = writer_->Append("label", LegacyShape(*bottom[1]), bottom[1]->cpu_data());
  }
  if (status_.ok()) rows_ += bottom[0]->shape(0);
}

PSTRAIN_REGISTER_LAYER("HDF5Output", Hdf5OutputLayer);

}  // namespace pstrain
