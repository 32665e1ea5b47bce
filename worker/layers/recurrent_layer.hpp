// RecurrentLayer: the base of RNN and LSTM, Caffe's RecurrentLayer.
//
// Bottoms: x (T x N x ...), cont (T x N; 0 where a stream starts a new
// sequence at that timestep), optionally x_static (N x ...), then with
// recurrent_param.expose_hidden the initial states (1 x N x num_output each:
// h0 for RNN; h0, c0 for LSTM). Tops: the output (T x N x num_output), then
// with expose_hidden the final states (hT; hT, cT).
//
// The layer builds an unrolled net of T timesteps (InnerProduct, Slice,
// Scale, Eltwise, Concat, TanH or LSTMUnit) through Net::Create, with the
// bottoms, the output and the states shared into it. Its blobs() are the
// unrolled net's parameters, each once, in Caffe's order (LstmLayer, RnnLayer),
// so a parameter server, a solver and a .caffemodel see them as any layer's.
// Without expose_hidden the state carries over between forwards: each forward
// starts from the last one's final state (cont = 0 resets it). Gradients go
// to x, x_static and (expose_hidden) the initial states; never to cont, and
// none flows back from the exposed final states or across forwards (Caffe's
// semantics). T is fixed at set-up; N may change. recurrent_param.debug_info
// is accepted and has no effect.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "worker/layer.hpp"

namespace pstrain {

class Net;

class RecurrentLayer : public Layer {
 public:
  explicit RecurrentLayer(const caffe::LayerParameter& param);
  ~RecurrentLayer() override;

  Status LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  Status Reshape(const BlobVec& bottom, const BlobVec& top) override;
  Status RuntimeStatus() const override;
#ifdef PSTRAIN_HAVE_CUDA
  bool HasGpuPath() const override { return true; }
#endif
  int MinBottomBlobs() const override { return 2 + NumExposedStates(); }
  int MaxBottomBlobs() const override { return MinBottomBlobs() + 1; }
  int ExactNumTopBlobs() const override { return 1 + NumExposedStates(); }
  bool AllowForceBackward(int bottom_index) const override { return bottom_index != 1; }

  // The unrolled net (tests read its blobs). Null before LayerSetUp.
  const Net* unrolled_net() const { return net_.get(); }

 protected:
  // What a recurrent type defines: the layers of its unrolled net after the
  // input layer (which has tops x, cont and, with a static input, x_static),
  // given T_, N_, static_input_ and recurrent_param.
  virtual void FillUnrolledNet(caffe::NetParameter* net) const = 0;
  // Names of the state blobs at timestep 0 and at timestep T, in the order of
  // the exposed bottoms and tops.
  virtual std::vector<std::string> RecurrentInputNames() const = 0;
  virtual std::vector<std::string> RecurrentOutputNames() const = 0;
  virtual std::string OutputName() const = 0;

  void ForwardReference(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardReference(const BlobVec& top, const std::vector<bool>& propagate_down,
                         const BlobVec& bottom) override;
  void ForwardFast(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardFast(const BlobVec& top, const std::vector<bool>& propagate_down,
                    const BlobVec& bottom) override;
#ifdef PSTRAIN_HAVE_CUDA
  void ForwardGpu(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom) override;
#endif

  int T_ = 0;  // timesteps
  int N_ = 0;  // independent streams
  bool static_input_ = false;

 private:
  // A parameter blob of a layer of the unrolled net and the one it shares.
  struct InnerParam {
    Layer* layer;
    int index;  // in layer->blobs()
    int outer;  // index in blobs()
  };

  int NumExposedStates() const;
  void RunForward(Engine engine);
  void RunBackward(Engine engine);
  // Points every inner parameter at blobs()[outer] again (the outer net may
  // have made blobs() share another net's storage) and copies
  // param_propagate_down into the unrolled layers.
  void BindParams();

  std::unique_ptr<Net> net_;
  Blob* x_ = nullptr;
  Blob* cont_ = nullptr;
  Blob* x_static_ = nullptr;
  Blob* output_ = nullptr;
  std::vector<Blob*> state_in_;
  std::vector<Blob*> state_out_;
  std::vector<InnerParam> inner_params_;
};

}  // namespace pstrain
