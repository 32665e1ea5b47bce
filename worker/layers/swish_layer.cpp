#include "worker/layers/swish_layer.hpp"

#include <cmath>

#include "worker/layer_registry.hpp"

namespace pstrain {

Status SwishLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  PSTRAIN_RETURN_IF_ERROR(NeuronLayer::Reshape(bottom, top));
  sigmoid_.ReshapeLike(*bottom[0]);
  return Status::Ok();
}

void SwishLayer::ForwardReference(const BlobVec& bottom, const BlobVec& top) {
  const float beta = param_.swish_param().beta();
  const float* x = bottom[0]->cpu_data();
  float* s = sigmoid_.mutable_cpu_data();
  float* y = top[0]->mutable_cpu_data();
  const int64_t n = bottom[0]->count();
  for (int64_t i = 0; i < n; ++i) {
    s[i] = 0.5f * std::tanh(0.5f * beta * x[i]) + 0.5f;  // Sigmoid's overflow-free form
    y[i] = x[i] * s[i];
  }
}

void SwishLayer::BackwardReference(const BlobVec& top, const std::vector<bool>& propagate_down,
                                   const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  const float beta = param_.swish_param().beta();
  const float* s = sigmoid_.cpu_data();
  const float* y = top[0]->cpu_data();
  const float* dy = top[0]->cpu_diff();
  float* dx = bottom[0]->mutable_cpu_diff();
  const int64_t n = top[0]->count();
  for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * (beta * y[i] + s[i] * (1.f - beta * y[i]));
}

PSTRAIN_REGISTER_LAYER("Swish", SwishLayer);

}  // namespace pstrain
