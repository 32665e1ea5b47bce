// Sigmoid: y = 1 / (1 + exp(-x)), computed as 0.5 * tanh(0.5 x) + 0.5 (equal,
// and it never overflows). Backward uses only the top data and diff:
// dx = dy * y * (1 - y).
// A TopOnlyActivationLayer: one bottom, one top of its shape, may run in place.
#pragma once

#include <cmath>

#include "worker/layers/top_only_activation_layer.hpp"

namespace pstrain {

struct SigmoidMath {
  PSTRAIN_ACTIVATION_FN static float Forward(float x) { return 0.5f * tanhf(0.5f * x) + 0.5f; }
  PSTRAIN_ACTIVATION_FN static float Backward(float y, float dy) { return dy * y * (1.f - y); }
};

class SigmoidLayer : public TopOnlyActivationLayer<SigmoidMath> {
 public:
  using TopOnlyActivationLayer::TopOnlyActivationLayer;
  const char* type() const override { return "Sigmoid"; }
};

}  // namespace pstrain
