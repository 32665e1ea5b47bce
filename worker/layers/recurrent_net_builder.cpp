#include "worker/layers/recurrent_net_builder.hpp"

namespace pstrain::unrolled {

caffe::LayerParameter* Add(caffe::NetParameter* net, const std::string& type,
                           const std::string& name, std::initializer_list<std::string> bottoms,
                           std::initializer_list<std::string> tops) {
  caffe::LayerParameter* layer = net->add_layer();
  layer->set_type(type);
  layer->set_name(name);
  for (const std::string& b : bottoms) layer->add_bottom(b);
  for (const std::string& t : tops) layer->add_top(t);
  return layer;
}

caffe::LayerParameter* AddProduct(caffe::NetParameter* net, const std::string& name,
                                  const std::string& bottom, const std::string& top, int axis,
                                  int num_output, const caffe::RecurrentParameter& p,
                                  const std::string& weight, const std::string& bias) {
  caffe::LayerParameter* layer = Add(net, "InnerProduct", name, {bottom}, {top});
  caffe::InnerProductParameter* ip = layer->mutable_inner_product_param();
  ip->set_num_output(num_output);
  ip->set_axis(axis);
  ip->set_bias_term(!bias.empty());
  *ip->mutable_weight_filler() = p.weight_filler();
  layer->add_param()->set_name(weight);
  if (!bias.empty()) {
    *ip->mutable_bias_filler() = p.bias_filler();
    layer->add_param()->set_name(bias);
  }
  return layer;
}

void AddStaticReshape(caffe::NetParameter* net, const std::string& name, const std::string& bottom,
                      const std::string& top, int num_output) {
  caffe::BlobShape* shape =
      Add(net, "Reshape", name, {bottom}, {top})->mutable_reshape_param()->mutable_shape();
  shape->add_dim(1);   // one timestep
  shape->add_dim(-1);  // the streams, whatever N is
  shape->add_dim(num_output);
}

}  // namespace pstrain::unrolled
