// RNN: a plain recurrent layer, Caffe's RNNLayer (a RecurrentLayer; bottoms,
// tops and state handling in recurrent_layer.hpp). With H =
// recurrent_param.num_output, for t = 1..T:
//   h_t = tanh(W_xh x_t + b_h + W_hh (cont_t h_{t-1}) (+ W_xh_static x_static))
//   o_t = tanh(W_ho h_t + b_o)
// and the output is o_1..o_T (T x N x H). Parameters, in Caffe's order:
//   W_xh [H, input size], b_h [H], W_xh_static [H, static size] (with a static
//   input), W_hh [H, H], W_ho [H, H], b_o [H]
// (weights from weight_filler, biases from bias_filler). State: h (expose_hidden
// bottom h0, top hT).
#pragma once

#include <string>
#include <vector>

#include "worker/layers/recurrent_layer.hpp"

namespace pstrain {

class RNNLayer : public RecurrentLayer {
 public:
  explicit RNNLayer(const caffe::LayerParameter& param) : RecurrentLayer(param) {}
  const char* type() const override { return "RNN"; }

 protected:
  void FillUnrolledNet(caffe::NetParameter* net) const override;
  std::vector<std::string> RecurrentInputNames() const override { return {"h_0"}; }
  std::vector<std::string> RecurrentOutputNames() const override {
    return {"h_" + std::to_string(T_)};
  }
  std::string OutputName() const override { return "o"; }
};

}  // namespace pstrain
