#include "worker/layers/euclidean_loss_layer.hpp"

#include "common/math_cpu.hpp"
#include "worker/layer_registry.hpp"

namespace pstrain {

Status EuclideanLossLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  PSTRAIN_RETURN_IF_ERROR(LossLayer::Reshape(bottom, top));
  if (bottom[0]->count(1) != bottom[1]->count(1)) {
    return Status::Error("inputs must have the same dimension: bottom 0 of shape " +
                         bottom[0]->shape_string() + " and bottom 1 of shape " +
                         bottom[1]->shape_string() + " differ in count(1)");
  }
  diff_.ReshapeLike(*bottom[0]);
  return Status::Ok();
}

void EuclideanLossLayer::ForwardReference(const BlobVec& bottom, const BlobVec& top) {
  const int64_t n = bottom[0]->count();
  const float* a = bottom[0]->cpu_data();
  const float* b = bottom[1]->cpu_data();
  float* d = diff_.mutable_cpu_data();
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    d[i] = a[i] - b[i];
    sum += static_cast<double>(d[i]) * d[i];
  }
  const int num = bottom[0]->shape(0);
  top[0]->mutable_cpu_data()[0] = num > 0 ? static_cast<float>(sum / num / 2) : 0.f;
}

void EuclideanLossLayer::BackwardReference(const BlobVec& top,
                                           const std::vector<bool>& propagate_down,
                                           const BlobVec& bottom) {
  const int num = bottom[0]->shape(0);
  if (num == 0) return;
  for (int i = 0; i < 2; ++i) {
    if (!propagate_down[i]) continue;
    const float sign = i == 0 ? 1.f : -1.f;
    const float alpha = sign * top[0]->cpu_diff()[0] / static_cast<float>(num);
    CpuScaleCopy(diff_.count(), alpha, diff_.cpu_data(), bottom[i]->mutable_cpu_diff());
  }
}

PSTRAIN_REGISTER_LAYER("EuclideanLoss", EuclideanLossLayer);

}  // namespace pstrain
