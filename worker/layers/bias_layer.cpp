#include "worker/layers/bias_layer.hpp"

#include <functional>
#include <string>

#include "common/math_cpu.hpp"
#include "worker/filler.hpp"
#include "worker/layer_registry.hpp"

namespace pstrain {
namespace {

Result<int> CanonicalAxis(const Blob& bottom, int axis) {
  if (axis < -bottom.num_axes() || axis >= bottom.num_axes()) {
    return Status::Error("axis " + std::to_string(axis) +
                         " is out of range for bottom 0 of shape " + bottom.shape_string());
  }
  return axis < 0 ? axis + bottom.num_axes() : axis;
}

Status ExtendsPast(const char* what, int axis) {
  return Status::Error(std::string(what) +
                       " blob's shape extends past bottom 0's shape when applied starting with "
                       "bottom 0 axis " +
                       std::to_string(axis));
}

}  // namespace

Result<std::vector<int>> BroadcastOperandShape(const Blob& bottom, int axis, int num_axes,
                                               const char* what) {
  PSTRAIN_ASSIGN_OR_RETURN(const int start, CanonicalAxis(bottom, axis));
  if (num_axes < -1) {
    return Status::Error(
        "num_axes must be non-negative, or -1 to extend to the end of bottom 0, "
        "got " +
        std::to_string(num_axes));
  }
  if (num_axes >= 0 && bottom.num_axes() < start + num_axes) return ExtendsPast(what, start);
  const int end = num_axes == -1 ? bottom.num_axes() : start + num_axes;
  return std::vector<int>(bottom.shape().begin() + start, bottom.shape().begin() + end);
}

Result<AxisBroadcast> ResolveBroadcast(const Blob& bottom, const Blob& operand, int axis,
                                       const char* what) {
  int start = 0;  // a scalar broadcasts the same from any axis
  if (operand.num_axes() > 0) {
    PSTRAIN_ASSIGN_OR_RETURN(start, CanonicalAxis(bottom, axis));
  }
  if (bottom.num_axes() < start + operand.num_axes()) return ExtendsPast(what, start);
  for (int i = 0; i < operand.num_axes(); ++i) {
    if (bottom.shape(start + i) != operand.shape(i)) {
      return Status::Error("dimension mismatch between bottom 0 axis " + std::to_string(start + i) +
                           " (" + std::to_string(bottom.shape(start + i)) + ") and " + what +
                           " axis " + std::to_string(i) + " (" + std::to_string(operand.shape(i)) +
                           ")");
    }
  }
  AxisBroadcast b;
  b.outer = bottom.count(0, start);
  b.dim = operand.count();
  b.inner = bottom.count(start + operand.num_axes());
  return b;
}

void BroadcastAdd(const AxisBroadcast& b, const float* bias, float* data) {
  for (int64_t o = 0; o < b.outer; ++o) {
    for (int64_t d = 0; d < b.dim; ++d) {
      float* row = data + (o * b.dim + d) * b.inner;
      for (int64_t i = 0; i < b.inner; ++i) row[i] += bias[d];
    }
  }
}

void BroadcastSumDiff(const AxisBroadcast& b, const float* top_diff, bool accumulate,
                      float* bias_diff) {
  if (!accumulate) CpuSet(b.dim, 0.f, bias_diff);
  for (int64_t o = 0; o < b.outer; ++o) {
    for (int64_t d = 0; d < b.dim; ++d) {
      const float* row = top_diff + (o * b.dim + d) * b.inner;
      double sum = 0;
      for (int64_t i = 0; i < b.inner; ++i) sum += row[i];
      bias_diff[d] += static_cast<float>(sum);
    }
  }
}

Status BiasLayer::LayerSetUp(const BlobVec& bottom, const BlobVec&) {
  if (bottom.size() > 1 || !blobs_.empty()) return Status::Ok();
  const caffe::BiasParameter& p = layer_param().bias_param();
  PSTRAIN_ASSIGN_OR_RETURN(std::vector<int> shape,
                           BroadcastOperandShape(*bottom[0], p.axis(), p.num_axes(), "bias"));
  auto blob = std::make_shared<Blob>(shape);
  caffe::FillerParameter filler = p.filler();
  if (!p.has_filler()) {
    filler.set_type("constant");
    filler.set_value(0.f);
  }
  PSTRAIN_RETURN_IF_ERROR(ValidateFiller(filler, *blob));
  Rng rng(MixSeed(context().seed, std::hash<std::string>{}(name())));
  Fill(filler, rng, blob.get());
  blobs_.push_back(std::move(blob));
  return Status::Ok();
}

Status BiasLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  const Blob& bias = bottom.size() > 1 ? *bottom[1] : *blobs_[0];
  PSTRAIN_ASSIGN_OR_RETURN(
      broadcast_, ResolveBroadcast(*bottom[0], bias, layer_param().bias_param().axis(), "bias"));
  if (bottom[0] != top[0]) top[0]->ReshapeLike(*bottom[0]);
  return Status::Ok();
}

void BiasLayer::ForwardReference(const BlobVec& bottom, const BlobVec& top) {
  const float* bias = bottom.size() > 1 ? bottom[1]->cpu_data() : blobs_[0]->cpu_data();
  if (bottom[0] != top[0]) {
    CpuCopy(bottom[0]->count(), bottom[0]->cpu_data(), top[0]->mutable_cpu_data());
  }
  BroadcastAdd(broadcast_, bias, top[0]->mutable_cpu_data());
}

void BiasLayer::BackwardReference(const BlobVec& top, const std::vector<bool>& propagate_down,
                                  const BlobVec& bottom) {
  const float* top_diff = top[0]->cpu_diff();
  if (propagate_down[0] && bottom[0] != top[0]) {
    CpuCopy(top[0]->count(), top_diff, bottom[0]->mutable_cpu_diff());
  }
  if (bottom.size() > 1) {
    if (propagate_down[1]) {
      BroadcastSumDiff(broadcast_, top_diff, false, bottom[1]->mutable_cpu_diff());
    }
  } else if (param_propagate_down(0)) {
    BroadcastSumDiff(broadcast_, top_diff, true, blobs_[0]->mutable_cpu_diff());
  }
}

PSTRAIN_REGISTER_LAYER("Bias", BiasLayer);

}  // namespace pstrain
