#include "worker/layers/dummy_data_layer.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
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

// The filler `filler` is for a sample of a step whose tops hold `step_count`
// values in all, `step_shape` (axis 0: every worker's samples): xavier and
// msra become the uniform and gaussian they draw from with that shape's fan
// (Caffe's fan-in count/shape(0), fan-out count/shape(1)); the others as given.
caffe::FillerParameter SampleFiller(const caffe::FillerParameter& filler,
                                    const std::vector<int64_t>& step_shape, int64_t step_count) {
  if (filler.type() != "xavier" && filler.type() != "msra") return filler;
  const float fan_in = static_cast<float>(step_count / step_shape[0]);
  const float fan_out =
      static_cast<float>(step_shape.size() > 1 ? step_count / step_shape[1] : step_count);
  float n = fan_in;
  if (filler.variance_norm() == caffe::FillerParameter::AVERAGE) n = (fan_in + fan_out) / 2.f;
  if (filler.variance_norm() == caffe::FillerParameter::FAN_OUT) n = fan_out;
  caffe::FillerParameter out;
  if (filler.type() == "xavier") {
    const float scale = std::sqrt(3.f / n);
    out.set_type("uniform");
    out.set_min(-scale);
    out.set_max(scale);
  } else {
    out.set_type("gaussian");
    out.set_mean(0.f);
    out.set_std(std::sqrt(2.f / n));
  }
  return out;
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
  if (context().world_size < 1 || context().rank < 0 || context().rank >= context().world_size) {
    return Status::Error("bad worker rank " + std::to_string(context().rank) + " of " +
                         std::to_string(context().world_size));
  }
  if (context().start_iter < 0) return Status::Error("start_iter must be >= 0");
  layer_seed_ = MixSeed(context().seed, std::hash<std::string>{}(name()));
  next_step_ = context().start_iter;
  // As Caffe: constant tops are filled here once; the others by every Forward.
  Rng unused(layer_seed_);  // a constant filler draws nothing
  for (int i = 0; i < num_top; ++i) {
    if (FillerOf(i).type() == "constant") Fill(FillerOf(i), unused, top[i]);
  }
  return Status::Ok();
}

void DummyDataLayer::FillTop(int top_index, int64_t step, Blob* top) {
  const int64_t batch = top->num_axes() > 0 ? top->shape(0) : 1;
  if (batch == 0 || top->count() == 0) return;
  const int64_t sample_count = top->count() / batch;
  const int64_t world = context().world_size;
  std::vector<int64_t> step_shape(top->shape().begin(), top->shape().end());
  if (step_shape.empty()) step_shape.push_back(1);
  step_shape[0] = world * batch;
  const caffe::FillerParameter& given = FillerOf(top_index);
  caffe::FillerParameter filler = SampleFiller(given, step_shape, world * top->count());
  const bool sparse = filler.type() == "gaussian" && filler.sparse() >= 0;
  const float keep =
      sparse
          ? std::min(1.f, static_cast<float>(filler.sparse()) / static_cast<float>(step_shape[0]))
          : 1.f;
  filler.set_sparse(-1);  // the mask is drawn below, from the sample's Rng
  std::vector<int> sample_shape = top->shape();
  if (!sample_shape.empty()) sample_shape[0] = 1;
  sample_.Reshape(sample_shape);
  const uint64_t top_seed = MixSeed(layer_seed_, static_cast<uint64_t>(top_index));
  const int64_t first = (step * world + context().rank) * batch;
  float* out = top->mutable_cpu_data();
  for (int64_t n = 0; n < batch; ++n) {
    Rng rng(MixSeed(top_seed, static_cast<uint64_t>(first + n)));
    Fill(filler, rng, &sample_);
    float* values = sample_.mutable_cpu_data();
    if (sparse) {
      for (int64_t j = 0; j < sample_count; ++j) {
        if (!rng.Bernoulli(keep)) values[j] = 0.f;
      }
    }
    std::memcpy(out + n * sample_count, values, static_cast<size_t>(sample_count) * sizeof(float));
  }
}

void DummyDataLayer::ForwardReference(const BlobVec& /*bottom*/, const BlobVec& top) {
  for (size_t i = 0; i < top.size(); ++i) {
    if (FillerOf(static_cast<int>(i)).type() != "constant") {
      FillTop(static_cast<int>(i), next_step_, top[i]);
    }
  }
  ++next_step_;
}

PSTRAIN_REGISTER_LAYER("DummyData", DummyDataLayer);

}  // namespace pstrain
