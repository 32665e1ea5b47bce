#include "worker/layers/scale_layer.hpp"

#include <functional>
#include <string>

#include "common/math_cpu.hpp"
#include "worker/filler.hpp"
#include "worker/layer_registry.hpp"

namespace pstrain {
namespace {

// A learned blob of `shape` filled by `filler`, or by a constant when the
// filler is not given.
Result<std::shared_ptr<Blob>> MakeFilled(const std::vector<int>& shape, bool has_filler,
                                         const caffe::FillerParameter& given, float constant,
                                         Rng& rng) {
  auto blob = std::make_shared<Blob>(shape);
  caffe::FillerParameter filler = given;
  if (!has_filler) {
    filler.set_type("constant");
    filler.set_value(constant);
  }
  PSTRAIN_RETURN_IF_ERROR(ValidateFiller(filler, *blob));
  Fill(filler, rng, blob.get());
  return blob;
}

}  // namespace

Status ScaleLayer::LayerSetUp(const BlobVec& bottom, const BlobVec&) {
  const caffe::ScaleParameter& p = layer_param().scale_param();
  Rng rng(MixSeed(context().seed, std::hash<std::string>{}(name())));
  const bool learned_scale = bottom.size() == 1;
  if (learned_scale && blobs_.empty()) {
    PSTRAIN_ASSIGN_OR_RETURN(std::vector<int> shape,
                             BroadcastOperandShape(*bottom[0], p.axis(), p.num_axes(), "scale"));
    PSTRAIN_ASSIGN_OR_RETURN(auto scale, MakeFilled(shape, p.has_filler(), p.filler(), 1.f, rng));
    blobs_.push_back(std::move(scale));
  }
  bias_index_ = -1;
  if (!p.bias_term()) return Status::Ok();
  bias_index_ = learned_scale ? 1 : 0;
  if (static_cast<int>(blobs_.size()) > bias_index_) return Status::Ok();  // given (loaded)
  // The bias covers the same axes as the scale.
  const int num_axes = learned_scale ? p.num_axes() : bottom[1]->num_axes();
  PSTRAIN_ASSIGN_OR_RETURN(std::vector<int> shape,
                           BroadcastOperandShape(*bottom[0], p.axis(), num_axes, "bias"));
  PSTRAIN_ASSIGN_OR_RETURN(auto bias,
                           MakeFilled(shape, p.has_bias_filler(), p.bias_filler(), 0.f, rng));
  blobs_.push_back(std::move(bias));
  return Status::Ok();
}

Status ScaleLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  const int axis = layer_param().scale_param().axis();
  const Blob& scale = bottom.size() > 1 ? *bottom[1] : *blobs_[0];
  PSTRAIN_ASSIGN_OR_RETURN(broadcast_, ResolveBroadcast(*bottom[0], scale, axis, "scale"));
  if (bias_index_ >= 0) {
    PSTRAIN_ASSIGN_OR_RETURN(AxisBroadcast bias,
                             ResolveBroadcast(*bottom[0], *blobs_[bias_index_], axis, "bias"));
    if (bias.dim != broadcast_.dim || bias.inner != broadcast_.inner) {
      return Status::Error("bias shape " + blobs_[bias_index_]->shape_string() +
                           " does not match scale shape " + scale.shape_string());
    }
  }
  if (bottom[0] == top[0]) {
    input_.ReshapeLike(*bottom[0]);
  } else {
    top[0]->ReshapeLike(*bottom[0]);
  }
  return Status::Ok();
}

void ScaleLayer::ForwardReference(const BlobVec& bottom, const BlobVec& top) {
  const float* x = bottom[0]->cpu_data();
  if (bottom[0] == top[0]) {
    CpuCopy(bottom[0]->count(), x, input_.mutable_cpu_data());
    x = input_.cpu_data();
  }
  const float* scale = bottom.size() > 1 ? bottom[1]->cpu_data() : blobs_[0]->cpu_data();
  float* y = top[0]->mutable_cpu_data();
  const AxisBroadcast& b = broadcast_;
  for (int64_t o = 0; o < b.outer; ++o) {
    for (int64_t d = 0; d < b.dim; ++d) {
      const int64_t offset = (o * b.dim + d) * b.inner;
      CpuScaleCopy(b.inner, scale[d], x + offset, y + offset);
    }
  }
  if (bias_index_ >= 0) BroadcastAdd(b, blobs_[bias_index_]->cpu_data(), y);
}

void ScaleLayer::BackwardReference(const BlobVec& top, const std::vector<bool>& propagate_down,
                                   const BlobVec& bottom) {
  const AxisBroadcast& b = broadcast_;
  const float* dy = top[0]->cpu_diff();
  if (bias_index_ >= 0 && param_propagate_down(bias_index_)) {
    BroadcastSumDiff(b, dy, true, blobs_[bias_index_]->mutable_cpu_diff());
  }
  const bool learned_scale = bottom.size() == 1;
  if (learned_scale ? param_propagate_down(0) : propagate_down[1]) {
    // ds[d] = sum over o, i of dy * x; accumulated into a param, written into bottom 1.
    const float* x = bottom[0] == top[0] ? input_.cpu_data() : bottom[0]->cpu_data();
    float* ds = learned_scale ? blobs_[0]->mutable_cpu_diff() : bottom[1]->mutable_cpu_diff();
    if (!learned_scale) CpuSet(b.dim, 0.f, ds);
    for (int64_t o = 0; o < b.outer; ++o) {
      for (int64_t d = 0; d < b.dim; ++d) {
        const int64_t offset = (o * b.dim + d) * b.inner;
        double sum = 0;
        for (int64_t i = 0; i < b.inner; ++i) {
          sum += static_cast<double>(dy[offset + i]) * x[offset + i];
        }
        ds[d] += static_cast<float>(sum);
      }
    }
  }
  if (propagate_down[0]) {
    const float* scale = learned_scale ? blobs_[0]->cpu_data() : bottom[1]->cpu_data();
    float* dx = bottom[0]->mutable_cpu_diff();  // may alias dy
    for (int64_t o = 0; o < b.outer; ++o) {
      for (int64_t d = 0; d < b.dim; ++d) {
        const int64_t offset = (o * b.dim + d) * b.inner;
        CpuScaleCopy(b.inner, scale[d], dy + offset, dx + offset);
      }
    }
  }
}

bool ScaleLayer::ScalesChannelsOf(const Blob& bottom) const {
  if (blobs_.empty() || bias_index_ == 0 || bottom.num_axes() < 2) return false;
  const std::vector<int> channels{bottom.shape(1)};
  if (blobs_[0]->shape() != channels) return false;
  if (bias_index_ >= 0 && blobs_[bias_index_]->shape() != channels) return false;
  // A [C] scale also broadcasts along another axis of length C: check the axis.
  return broadcast_.outer == bottom.shape(0) && broadcast_.dim == bottom.shape(1);
}

void ScaleLayer::ForwardFast(const BlobVec& bottom, const BlobVec& top) {
  if (fused_into_ != nullptr) return;  // the BatchNorm's Forward wrote the result
  ForwardReference(bottom, top);
}

void ScaleLayer::BackwardFused(const std::vector<bool>& propagate_down) {
  fused_into_->BackwardFused(param_propagate_down(0),
                             bias_index_ >= 0 && param_propagate_down(bias_index_),
                             propagate_down[0]);
}

void ScaleLayer::BackwardFast(const BlobVec& top, const std::vector<bool>& propagate_down,
                              const BlobVec& bottom) {
  if (fused_into_ != nullptr) return BackwardFused(propagate_down);
  BackwardReference(top, propagate_down, bottom);
}

PSTRAIN_REGISTER_LAYER("Scale", ScaleLayer);

}  // namespace pstrain
