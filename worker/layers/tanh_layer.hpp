// TanH: y = tanh(x). Backward uses only the top data and diff:
// dx = dy * (1 - y^2).
// A TopOnlyActivationLayer: one bottom, one top of its shape, may run in place.
#pragma once

#include <cmath>

#include "worker/layers/top_only_activation_layer.hpp"

namespace pstrain {

struct TanHMath {
  PSTRAIN_ACTIVATION_FN static float Forward(float x) { return tanhf(x); }
  PSTRAIN_ACTIVATION_FN static float Backward(float y, float dy) { return dy * (1.f - y * y); }
};

class TanHLayer : public TopOnlyActivationLayer<TanHMath> {
 public:
  using TopOnlyActivationLayer::TopOnlyActivationLayer;
  const char* type() const override { return "TanH"; }
};

}  // namespace pstrain
