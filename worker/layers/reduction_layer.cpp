#include "worker/layers/reduction_layer.hpp"

#include <cmath>

#include "worker/layer_registry.hpp"

namespace pstrain {

using Op = caffe::ReductionParameter;

Status ReductionLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  const int axis = param_.reduction_param().axis();
  const Blob& x = *bottom[0];
  if (axis < -x.num_axes() || axis >= x.num_axes()) {
    return Status::Error("reduction_param.axis " + std::to_string(axis) +
                         " is out of range for bottom 0 of shape " + x.shape_string());
  }
  const int canonical = x.CanonicalAxisIndex(axis);
  top[0]->Reshape(std::vector<int>(x.shape().begin(), x.shape().begin() + canonical));
  num_ = x.count(0, canonical);
  dim_ = x.count(canonical);
  return Status::Ok();
}

void ReductionLayer::ForwardReference(const BlobVec& bottom, const BlobVec& top) {
  const caffe::ReductionParameter& p = param_.reduction_param();
  const float* x = bottom[0]->cpu_data();
  float* y = top[0]->mutable_cpu_data();
  for (int64_t i = 0; i < num_; ++i) {
    const float* row = x + i * dim_;
    double sum = 0;
    for (int64_t j = 0; j < dim_; ++j) {
      switch (p.operation()) {
        case Op::ASUM:
          sum += std::fabs(row[j]);
          break;
        case Op::SUMSQ:
          sum += static_cast<double>(row[j]) * row[j];
          break;
        default:  // SUM, MEAN
          sum += row[j];
      }
    }
    if (p.operation() == Op::MEAN && dim_ > 0) sum /= static_cast<double>(dim_);
    y[i] = static_cast<float>(sum) * p.coeff();
  }
}

void ReductionLayer::BackwardReference(const BlobVec& top, const std::vector<bool>& propagate_down,
                                       const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  const caffe::ReductionParameter& p = param_.reduction_param();
  const float* x = bottom[0]->cpu_data();
  const float* dy = top[0]->cpu_diff();
  float* dx = bottom[0]->mutable_cpu_diff();
  const float mean_scale = p.operation() == Op::MEAN ? 1.f / static_cast<float>(dim_) : 1.f;
  for (int64_t i = 0; i < num_; ++i) {
    const float g = dy[i] * p.coeff() * mean_scale;
    for (int64_t j = i * dim_; j < (i + 1) * dim_; ++j) {
      switch (p.operation()) {
        case Op::ASUM:
          dx[j] = g * static_cast<float>((x[j] > 0.f) - (x[j] < 0.f));
          break;
        case Op::SUMSQ:
          dx[j] = 2.f * g * x[j];
          break;
        default:
          dx[j] = g;
      }
    }
  }
}

PSTRAIN_REGISTER_LAYER("Reduction", ReductionLayer);

}  // namespace pstrain
