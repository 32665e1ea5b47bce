// LSTMUnit: one step of an LSTM cell, Caffe's LSTMUnitLayer.
//
// Bottoms: c_prev (1 x N x D), gates x (1 x N x 4D: i', f', o', g' in that
// order along the last axis), cont (1 x N). Tops: c and h (1 x N x D).
//   i = sigmoid(i'), f = cont * sigmoid(f') (0 where cont is 0),
//   o = sigmoid(o'), g = tanh(g')
//   c = f * c_prev + i * g,  h = o * tanh(c)
// Gradients go to c_prev and x; cont (bottom 2) takes none. As in Caffe, the
// forget gate's gradient is taken as if cont were binary: dc * c_prev * f (1 - f).
#pragma once

#include <vector>

#include "worker/layer.hpp"

namespace pstrain {

class LSTMUnitLayer : public Layer {
 public:
  explicit LSTMUnitLayer(const caffe::LayerParameter& param) : Layer(param) {}

  Status Reshape(const BlobVec& bottom, const BlobVec& top) override;
  const char* type() const override { return "LSTMUnit"; }
#ifdef PSTRAIN_HAVE_CUDA
  bool HasGpuPath() const override { return true; }
#endif
  int ExactNumBottomBlobs() const override { return 3; }
  int ExactNumTopBlobs() const override { return 2; }
  bool AllowForceBackward(int bottom_index) const override { return bottom_index != 2; }

 protected:
  void ForwardReference(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardReference(const BlobVec& top, const std::vector<bool>& propagate_down,
                         const BlobVec& bottom) override;
#ifdef PSTRAIN_HAVE_CUDA
  void ForwardGpu(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom) override;
#endif

 private:
  int num_ = 0;         // N: independent streams
  int hidden_dim_ = 0;  // D
};

}  // namespace pstrain
