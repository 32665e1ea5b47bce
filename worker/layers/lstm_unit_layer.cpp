#include "worker/layers/lstm_unit_layer.hpp"

#include <cmath>
#include <string>

#include "worker/layer_registry.hpp"

namespace pstrain {
namespace {

float Sigmoid(float x) { return 1.f / (1.f + std::exp(-x)); }

const char* const kBottomNames[] = {"c_prev", "x", "cont"};

}  // namespace

Status LSTMUnitLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  for (int i = 0; i < 3; ++i) {
    const Blob& b = *bottom[i];
    const int axes = i == 2 ? 2 : 3;
    const std::string what = "bottom " + std::to_string(i) + " (" + kBottomNames[i] + ")";
    if (b.num_axes() != axes) {
      return Status::Error(what + " must have " + std::to_string(axes) + " axes, got " +
                           b.shape_string());
    }
    if (b.shape(0) != 1 || b.shape(1) != bottom[0]->shape(1)) {
      return Status::Error(what + " must be 1 x " + std::to_string(bottom[0]->shape(1)) +
                           " in its first two axes (one timestep of the streams of bottom 0), "
                           "got " +
                           b.shape_string());
    }
  }
  num_ = bottom[0]->shape(1);
  hidden_dim_ = bottom[0]->shape(2);
  if (bottom[1]->shape(2) != 4 * hidden_dim_) {
    return Status::Error("bottom 1 (x) must hold 4 x " + std::to_string(hidden_dim_) +
                         " gate inputs per stream, got " + bottom[1]->shape_string());
  }
  top[0]->ReshapeLike(*bottom[0]);
  top[1]->ReshapeLike(*bottom[0]);
  return Status::Ok();
}

void LSTMUnitLayer::ForwardReference(const BlobVec& bottom, const BlobVec& top) {
  const int d_count = hidden_dim_;
  const float* c_prev = bottom[0]->cpu_data();
  const float* x = bottom[1]->cpu_data();
  const float* cont = bottom[2]->cpu_data();
  float* c = top[0]->mutable_cpu_data();
  float* h = top[1]->mutable_cpu_data();
  for (int n = 0; n < num_; ++n) {
    const float* xn = x + static_cast<int64_t>(n) * 4 * d_count;
    for (int d = 0; d < d_count; ++d) {
      const int64_t k = static_cast<int64_t>(n) * d_count + d;
      const float i = Sigmoid(xn[d]);
      const float f = cont[n] == 0.f ? 0.f : cont[n] * Sigmoid(xn[d_count + d]);
      const float o = Sigmoid(xn[2 * d_count + d]);
      const float g = std::tanh(xn[3 * d_count + d]);
      c[k] = f * c_prev[k] + i * g;
      h[k] = o * std::tanh(c[k]);
    }
  }
}

void LSTMUnitLayer::BackwardReference(const BlobVec& top, const std::vector<bool>& propagate_down,
                                      const BlobVec& bottom) {
  if (!propagate_down[0] && !propagate_down[1]) return;
  const int d_count = hidden_dim_;
  const float* c_prev = bottom[0]->cpu_data();
  const float* x = bottom[1]->cpu_data();
  const float* cont = bottom[2]->cpu_data();
  const float* c = top[0]->cpu_data();
  const float* dc = top[0]->cpu_diff();
  const float* dh = top[1]->cpu_diff();
  // Both written: Caffe's LSTMUnit fills c_prev's and x's diffs together.
  float* dc_prev = bottom[0]->mutable_cpu_diff();
  float* dx = bottom[1]->mutable_cpu_diff();
  for (int n = 0; n < num_; ++n) {
    const float* xn = x + static_cast<int64_t>(n) * 4 * d_count;
    float* dxn = dx + static_cast<int64_t>(n) * 4 * d_count;
    for (int d = 0; d < d_count; ++d) {
      const int64_t k = static_cast<int64_t>(n) * d_count + d;
      const float i = Sigmoid(xn[d]);
      const float f = cont[n] == 0.f ? 0.f : cont[n] * Sigmoid(xn[d_count + d]);
      const float o = Sigmoid(xn[2 * d_count + d]);
      const float g = std::tanh(xn[3 * d_count + d]);
      const float tanh_c = std::tanh(c[k]);
      const float dc_total = dc[k] + dh[k] * o * (1.f - tanh_c * tanh_c);
      dc_prev[k] = dc_total * f;
      dxn[d] = dc_total * g * i * (1.f - i);
      dxn[d_count + d] = dc_total * c_prev[k] * f * (1.f - f);
      dxn[2 * d_count + d] = dh[k] * tanh_c * o * (1.f - o);
      dxn[3 * d_count + d] = dc_total * i * (1.f - g * g);
    }
  }
}

PSTRAIN_REGISTER_LAYER("LSTMUnit", LSTMUnitLayer);

}  // namespace pstrain
