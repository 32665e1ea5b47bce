#include "worker/layers/dummy_data_layer.hpp"

#include <functional>

#include "worker/filler.hpp"
#include "worker/layer_registry.hpp"

namespace pstrain {
namespace {

// Checks that a legacy repeated field has 1 or num_top values.
Status CheckCount(int n, int num_top, const char* field) {
  if (n == 1 || n == num_top) return Status::Ok();
  return Status::Error(std::string("dummy_data_param.") + field +
                       " must be given once or once per top: " + std::to_string(num_top) +
                       " tops, " + std::to_string(n) + " values");
}

}  // namespace

const caffe::FillerParameter& DummyDataLayer::FillerOf(int top_index) const {
  return fillers_[fillers_.size() == 1 ? 0 : static_cast<size_t>(top_index)];
}

Status DummyDataLayer::LayerSetUp(const BlobVec& /*bottom*/, const BlobVec& top) {
  const caffe::DummyDataParameter& p = param_.dummy_data_param();
  const int num_top = static_cast<int>(top.size());
  const int num_fillers = p.data_filler_size();
  if (num_fillers != 0 && num_fillers != 1 && num_fillers != num_top) {
    return Status::Error("dummy_data_param.data_filler must be given 0, 1 or once per top: " +
                         std::to_string(num_top) + " tops, " + std::to_string(num_fillers) +
                         " fillers");
  }
  fillers_.clear();
  if (num_fillers == 0) {
    caffe::FillerParameter zero;
    zero.set_type("constant");
    zero.set_value(0.f);
    fillers_.push_back(zero);
  } else {
    fillers_.assign(p.data_filler().begin(), p.data_filler().end());
  }

  const int legacy = p.num_size() + p.channels_size() + p.height_size() + p.width_size();
  if (legacy > 0) {
    if (p.shape_size() > 0) {
      return Status::Error(
          "dummy_data_param: give either shape or num/channels/height/width, "
          "not both");
    }
    PSTRAIN_RETURN_IF_ERROR(CheckCount(p.num_size(), num_top, "num"));
    PSTRAIN_RETURN_IF_ERROR(CheckCount(p.channels_size(), num_top, "channels"));
    PSTRAIN_RETURN_IF_ERROR(CheckCount(p.height_size(), num_top, "height"));
    PSTRAIN_RETURN_IF_ERROR(CheckCount(p.width_size(), num_top, "width"));
  } else if (p.shape_size() != 1 && p.shape_size() != num_top) {
    return Status::Error(
        "dummy_data_param.shape must be given once or once per top: " + std::to_string(num_top) +
        " tops, " + std::to_string(p.shape_size()) + " shapes");
  }
  for (int i = 0; i < num_top; ++i) {
    std::vector<int> shape;
    if (legacy > 0) {
      auto pick = [i](const google::protobuf::RepeatedField<uint32_t>& f) {
        return static_cast<int>(f.size() == 1 ? f.Get(0) : f.Get(i));
      };
      shape = {pick(p.num()), pick(p.channels()), pick(p.height()), pick(p.width())};
      for (int d : shape) {
        if (d < 0) return Status::Error("dummy_data_param: dimension too large");
      }
    } else {
      PSTRAIN_ASSIGN_OR_RETURN(shape, ShapeFromProto(p.shape(p.shape_size() == 1 ? 0 : i)));
    }
    top[i]->Reshape(shape);
    PSTRAIN_RETURN_IF_ERROR(ValidateFiller(FillerOf(i), *top[i], context().max_blob_values)
                                .WithContext("data_filler for top " + std::to_string(i)));
  }
  rng_ = Rng(MixSeed(context().seed, std::hash<std::string>{}(name())));
  // As Caffe: constant tops are filled here once; the others by every Forward.
  for (int i = 0; i < num_top; ++i) {
    if (FillerOf(i).type() == "constant") Fill(FillerOf(i), rng_, top[i]);
  }
  return Status::Ok();
}

void DummyDataLayer::ForwardReference(const BlobVec& /*bottom*/, const BlobVec& top) {
  for (size_t i = 0; i < top.size(); ++i) {
    const caffe::FillerParameter& filler = FillerOf(static_cast<int>(i));
    if (filler.type() != "constant") Fill(filler, rng_, top[i]);
  }
}

PSTRAIN_REGISTER_LAYER("DummyData", DummyDataLayer);

}  // namespace pstrain
