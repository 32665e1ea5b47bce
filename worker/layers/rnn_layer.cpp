#include "worker/layers/rnn_layer.hpp"

#include "worker/layer_registry.hpp"
#include "worker/layers/recurrent_net_builder.hpp"

namespace pstrain {

using unrolled::Add;
using unrolled::AddProduct;
using unrolled::At;

void RNNLayer::FillUnrolledNet(caffe::NetParameter* net) const {
  const caffe::RecurrentParameter& p = param_.recurrent_param();
  const int hidden = static_cast<int>(p.num_output());
  caffe::BlobShape* shape =
      Add(net, "Input", "states", {}, {"h_0"})->mutable_input_param()->add_shape();
  shape->add_dim(1);
  shape->add_dim(N_);
  shape->add_dim(hidden);
  caffe::LayerParameter* cont_slice = Add(net, "Slice", "cont_slice", {"cont"}, {});
  cont_slice->mutable_slice_param()->set_axis(0);
  AddProduct(net, "x_transform", "x", "W_xh_x", 2, hidden, p, "W_xh", "b_h");
  if (static_input_) {
    AddProduct(net, "W_xh_x_static", "x_static", "W_xh_x_static_preshape", 1, hidden, p,
               "W_xh_static", "");
    unrolled::AddStaticReshape(net, "W_xh_x_static_reshape", "W_xh_x_static_preshape",
                               "W_xh_x_static", hidden);
  }
  caffe::LayerParameter* x_slice = Add(net, "Slice", "W_xh_x_slice", {"W_xh_x"}, {});
  x_slice->mutable_slice_param()->set_axis(0);
  caffe::LayerParameter o_concat;
  o_concat.set_type("Concat");
  o_concat.set_name("o_concat");
  o_concat.add_top("o");
  o_concat.mutable_concat_param()->set_axis(0);
  for (int t = 1; t <= T_; ++t) {
    cont_slice->add_top(At("cont", t));
    x_slice->add_top(At("W_xh_x", t));
    Add(net, "Scale", At("h_conted", t - 1), {At("h", t - 1), At("cont", t)},
        {At("h_conted", t - 1)})
        ->mutable_scale_param()
        ->set_axis(0);
    AddProduct(net, At("W_hh_h", t - 1), At("h_conted", t - 1), At("W_hh_h", t - 1), 2, hidden, p,
               "W_hh", "");
    caffe::LayerParameter* sum =
        Add(net, "Eltwise", At("h_input_sum", t), {At("W_hh_h", t - 1), At("W_xh_x", t)},
            {At("h_neuron_input", t)});
    if (static_input_) sum->add_bottom("W_xh_x_static");
    sum->mutable_eltwise_param()->set_operation(caffe::EltwiseParameter::SUM);
    Add(net, "TanH", At("h_neuron", t), {At("h_neuron_input", t)}, {At("h", t)});
    AddProduct(net, At("W_ho_h", t), At("h", t), At("W_ho_h", t), 2, hidden, p, "W_ho", "b_o");
    Add(net, "TanH", At("o_neuron", t), {At("W_ho_h", t)}, {At("o", t)});
    o_concat.add_bottom(At("o", t));
  }
  *net->add_layer() = o_concat;
}

PSTRAIN_REGISTER_LAYER("RNN", RNNLayer);

}  // namespace pstrain
