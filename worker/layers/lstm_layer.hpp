// LSTM: a long short-term memory layer, Caffe's LSTMLayer (a RecurrentLayer;
// bottoms, tops and state handling in recurrent_layer.hpp). With H =
// recurrent_param.num_output, for t = 1..T:
//   [i' f' o' g'] = W_xc x_t + b_c + W_hc (cont_t h_{t-1}) (+ W_xc_static x_static)
//   c_t, h_t = LSTMUnit(c_{t-1}, [i' f' o' g'], cont_t)   (lstm_unit_layer.hpp)
// and the output is h_1..h_T (T x N x H). Parameters, in Caffe's order:
//   W_xc [4H, input size]   weight_filler
//   b_c  [4H]               bias_filler
//   W_xc_static [4H, static size]   (with a static input)
//   W_hc [4H, H]            weight_filler
// States: h, then c (expose_hidden bottoms h0, c0 and tops hT, cT).
#pragma once

#include <string>
#include <vector>

#include "worker/layers/recurrent_layer.hpp"

namespace pstrain {

class LSTMLayer : public RecurrentLayer {
 public:
  explicit LSTMLayer(const caffe::LayerParameter& param) : RecurrentLayer(param) {}
  const char* type() const override { return "LSTM"; }

 protected:
  void FillUnrolledNet(caffe::NetParameter* net) const override;
  std::vector<std::string> RecurrentInputNames() const override { return {"h_0", "c_0"}; }
  std::vector<std::string> RecurrentOutputNames() const override {
    return {"h_" + std::to_string(T_), "c_T"};
  }
  std::string OutputName() const override { return "h"; }
};

}  // namespace pstrain
