#include "worker/layers/inner_product_layer.hpp"

#include <algorithm>
#include <functional>
#include <limits>
#include <string>

#include "common/math_cpu.hpp"
#include "worker/filler.hpp"
#include "worker/layer_registry.hpp"
#include "worker/layers/cpu_kernel_isa.hpp"

namespace pstrain {
namespace {

// The first axis folded into the input vector, checked against the bottom.
Result<int> InputAxis(int axis, const Blob& bottom) {
  const int n = bottom.num_axes();
  if (axis < -n || axis >= n) {
    return Status::Error("bottom 0 has " + std::to_string(n) + " axes; InnerProduct with axis " +
                         std::to_string(axis) + " needs more");
  }
  return axis < 0 ? axis + n : axis;
}

}  // namespace

Status InnerProductLayer::LayerSetUp(const BlobVec& bottom, const BlobVec& /*top*/) {
  const caffe::InnerProductParameter& p = param_.inner_product_param();
  if (!p.has_num_output() || p.num_output() == 0) {
    return Status::Error("num_output must be given (and > 0)");
  }
  if (p.num_output() > static_cast<uint32_t>(std::numeric_limits<int>::max())) {
    return Status::Error("num_output " + std::to_string(p.num_output()) + " is too large");
  }
  n_ = static_cast<int>(p.num_output());
  bias_term_ = p.bias_term();
  transpose_ = p.transpose();
  PSTRAIN_ASSIGN_OR_RETURN(axis_, InputAxis(p.axis(), *bottom[0]));
  const int64_t k = bottom[0]->count(axis_);
  if (k > std::numeric_limits<int>::max()) {
    return Status::Error("input size K = " + std::to_string(k) + " is too large");
  }
  k_ = static_cast<int>(k);

  const std::vector<int> weight_shape =
      transpose_ ? std::vector<int>{k_, n_} : std::vector<int>{n_, k_};
  const size_t num_blobs = bias_term_ ? 2 : 1;
  if (!blobs_.empty()) {
    // Pre-loaded or shared params: keep their values, check their shapes.
    if (blobs_.size() != num_blobs) {
      return Status::Error("expected " + std::to_string(num_blobs) + " param blobs, got " +
                           std::to_string(blobs_.size()));
    }
    if (blobs_[0]->shape() != weight_shape) {
      return Status::Error("weight shape " + blobs_[0]->shape_string() + " does not match " +
                           ShapeString(weight_shape));
    }
    if (bias_term_ && blobs_[1]->shape() != std::vector<int>{n_}) {
      return Status::Error("bias shape " + blobs_[1]->shape_string() + " does not match " +
                           ShapeString({n_}));
    }
    return Status::Ok();
  }
  auto weight = std::make_shared<Blob>(weight_shape);
  PSTRAIN_RETURN_IF_ERROR(ValidateFiller(p.weight_filler(), *weight, context().max_blob_values)
                              .WithContext("weight_filler"));
  std::shared_ptr<Blob> bias;
  if (bias_term_) {
    bias = std::make_shared<Blob>(std::vector<int>{n_});
    PSTRAIN_RETURN_IF_ERROR(ValidateFiller(p.bias_filler(), *bias, context().max_blob_values)
                                .WithContext("bias_filler"));
  }
  Rng rng(MixSeed(context().seed, std::hash<std::string>{}(name())));
  Fill(p.weight_filler(), rng, weight.get());
  blobs_.push_back(weight);
  if (bias_term_) {
    Fill(p.bias_filler(), rng, bias.get());
    blobs_.push_back(bias);
  }
  return Status::Ok();
}

Status InnerProductLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  PSTRAIN_ASSIGN_OR_RETURN(const int axis,
                           InputAxis(param_.inner_product_param().axis(), *bottom[0]));
  const int64_t k = bottom[0]->count(axis);
  if (k != k_) {
    return Status::Error("input size K changed from " + std::to_string(k_) + " to " +
                         std::to_string(k) + " (bottom " + bottom[0]->shape_string() + ")");
  }
  const int64_t m = bottom[0]->count(0, axis_);
  if (m > std::numeric_limits<int>::max()) {
    return Status::Error("bottom " + bottom[0]->shape_string() + " has too many rows");
  }
  axis_ = axis;
  m_ = static_cast<int>(m);
  std::vector<int> top_shape(bottom[0]->shape().begin(), bottom[0]->shape().begin() + axis_);
  top_shape.push_back(n_);
  top[0]->Reshape(top_shape);
  if (bias_term_) bias_multiplier_.assign(m_, 1.f);
  return Status::Ok();
}

void InnerProductLayer::ForwardReference(const BlobVec& bottom, const BlobVec& top) {
  const float* x = bottom[0]->cpu_data();
  const float* w = blobs_[0]->cpu_data();
  float* y = top[0]->mutable_cpu_data();
  if (m_ == 0) return;
  if (m_ == 1) {
    // y[N] = W x: W is [N, K], or [K, N] (then y = W^T x).
    if (transpose_) {
      CpuGemv(Trans::kYes, k_, n_, 1.f, w, x, 0.f, y);
    } else {
      CpuGemv(Trans::kNo, n_, k_, 1.f, w, x, 0.f, y);
    }
    if (bias_term_) CpuAxpy(n_, 1.f, blobs_[1]->cpu_data(), y);
    return;
  }
  // Y[M, N] = X[M, K] * op(W) (+ ones[M] * b[N]).
  CpuGemm(Trans::kNo, transpose_ ? Trans::kNo : Trans::kYes, m_, n_, k_, 1.f, x, w, 0.f, y);
  if (bias_term_) {
    CpuGemm(Trans::kNo, Trans::kNo, m_, n_, 1, 1.f, bias_multiplier_.data(), blobs_[1]->cpu_data(),
            1.f, y);
  }
}

void InnerProductLayer::BackwardReference(const BlobVec& top,
                                          const std::vector<bool>& propagate_down,
                                          const BlobVec& bottom) {
  if (m_ == 0) return;
  const float* dy = top[0]->cpu_diff();
  if (param_propagate_down(0)) {
    const float* x = bottom[0]->cpu_data();
    float* dw = blobs_[0]->mutable_cpu_diff();
    if (transpose_) {
      // dW[K, N] += X^T[K, M] * dY[M, N]
      CpuGemm(Trans::kYes, Trans::kNo, k_, n_, m_, 1.f, x, dy, 1.f, dw);
    } else {
      // dW[N, K] += dY^T[N, M] * X[M, K]
      CpuGemm(Trans::kYes, Trans::kNo, n_, k_, m_, 1.f, dy, x, 1.f, dw);
    }
  }
  if (bias_term_ && param_propagate_down(1)) {
    // db[N] += dY^T[N, M] * ones[M]
    CpuGemv(Trans::kYes, m_, n_, 1.f, dy, bias_multiplier_.data(), 1.f,
            blobs_[1]->mutable_cpu_diff());
  }
  if (propagate_down[0]) {
    const float* w = blobs_[0]->cpu_data();
    float* dx = bottom[0]->mutable_cpu_diff();
    // dX[M, K] = dY[M, N] * W[N, K]  (or dY * W^T with W [K, N])
    CpuGemm(Trans::kNo, transpose_ ? Trans::kYes : Trans::kNo, m_, k_, n_, 1.f, dy, w, 0.f, dx);
  }
}

std::vector<std::string> InnerProductLayer::CpuImplementations() const {
  if (transpose_ || m_ == 0 || m_ > kVectorMaxRows ||
      static_cast<int64_t>(n_) * k_ < kVectorMinWeights) {
    return {"reference"};
  }
  switch (KernelIsa()) {
    case CpuIsa::kAvx512:
      return {"vector", "reference"};
    case CpuIsa::kAvx2:  // faster forward, slower weight gradient: engine auto decides
      return {"reference", "vector"};
    case CpuIsa::kGeneric:
      break;
  }
  return {"reference"};
}

Status InnerProductLayer::SelectCpuImplementation(const std::string& name) {
  const std::vector<std::string> names = CpuImplementations();
  if (std::find(names.begin(), names.end(), name) == names.end()) {
    return Layer::SelectCpuImplementation(name);  // the error naming the choices
  }
  selected_ = name;
  return Status::Ok();
}

std::string InnerProductLayer::CpuImplementation() const {
  const std::vector<std::string> names = CpuImplementations();
  if (std::find(names.begin(), names.end(), selected_) != names.end()) return selected_;
  return names.front();  // nothing selected, or the selection cannot run this shape
}

void InnerProductLayer::ForwardFast(const BlobVec& bottom, const BlobVec& top) {
  if (CpuImplementation() == "vector") return ForwardVector(bottom, top);
  ForwardReference(bottom, top);
}

void InnerProductLayer::BackwardFast(const BlobVec& top, const std::vector<bool>& propagate_down,
                                     const BlobVec& bottom) {
  if (CpuImplementation() == "vector") return BackwardVector(top, propagate_down, bottom);
  BackwardReference(top, propagate_down, bottom);
}

PSTRAIN_REGISTER_LAYER("InnerProduct", InnerProductLayer);

}  // namespace pstrain
