#include "worker/layers/lstm_layer.hpp"

#include "worker/layer_registry.hpp"
#include "worker/layers/recurrent_net_builder.hpp"

namespace pstrain {

using unrolled::Add;
using unrolled::AddProduct;
using unrolled::At;

void LSTMLayer::FillUnrolledNet(caffe::NetParameter* net) const {
  const caffe::RecurrentParameter& p = param_.recurrent_param();
  const int gates = 4 * static_cast<int>(p.num_output());
  const std::vector<int> state = {1, N_, static_cast<int>(p.num_output())};
  caffe::LayerParameter* states = Add(net, "Input", "states", {}, {"c_0", "h_0"});
  for (int i = 0; i < 2; ++i) {
    caffe::BlobShape* shape = states->mutable_input_param()->add_shape();
    for (int d : state) shape->add_dim(d);
  }
  caffe::LayerParameter* cont_slice = Add(net, "Slice", "cont_slice", {"cont"}, {});
  cont_slice->mutable_slice_param()->set_axis(0);
  AddProduct(net, "x_transform", "x", "W_xc_x", 2, gates, p, "W_xc", "b_c");
  if (static_input_) {
    AddProduct(net, "W_xc_x_static", "x_static", "W_xc_x_static_preshape", 1, gates, p,
               "W_xc_static", "");
    unrolled::AddStaticReshape(net, "W_xc_x_static_reshape", "W_xc_x_static_preshape",
                               "W_xc_x_static", gates);
  }
  caffe::LayerParameter* x_slice = Add(net, "Slice", "W_xc_x_slice", {"W_xc_x"}, {});
  x_slice->mutable_slice_param()->set_axis(0);
  caffe::LayerParameter h_concat;
  h_concat.set_type("Concat");
  h_concat.set_name("h_concat");
  h_concat.add_top("h");
  h_concat.mutable_concat_param()->set_axis(0);
  for (int t = 1; t <= T_; ++t) {
    cont_slice->add_top(At("cont", t));
    x_slice->add_top(At("W_xc_x", t));
    // h_conted_{t-1} = cont_t * h_{t-1}: a new sequence starts from zero.
    Add(net, "Scale", At("h_conted", t - 1), {At("h", t - 1), At("cont", t)},
        {At("h_conted", t - 1)})
        ->mutable_scale_param()
        ->set_axis(0);
    AddProduct(net, At("transform", t), At("h_conted", t - 1), At("W_hc_h", t - 1), 2, gates, p,
               "W_hc", "");
    caffe::LayerParameter* sum = Add(net, "Eltwise", At("gate_input", t),
                                     {At("W_hc_h", t - 1), At("W_xc_x", t)}, {At("gate_input", t)});
    if (static_input_) sum->add_bottom("W_xc_x_static");
    sum->mutable_eltwise_param()->set_operation(caffe::EltwiseParameter::SUM);
    Add(net, "LSTMUnit", At("unit", t), {At("c", t - 1), At("gate_input", t), At("cont", t)},
        {At("c", t), At("h", t)});
    h_concat.add_bottom(At("h", t));
  }
  Add(net, "Split", "c_T_copy", {At("c", T_)}, {"c_T"});
  *net->add_layer() = h_concat;
}

PSTRAIN_REGISTER_LAYER("LSTM", LSTMLayer);

}  // namespace pstrain
