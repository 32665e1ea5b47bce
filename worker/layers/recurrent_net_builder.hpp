// Building blocks of the unrolled nets of RNN and LSTM (recurrent_layer.hpp):
// small helpers that append layers to a NetParameter. Internal to
// worker/layers/.
#pragma once

#include <initializer_list>
#include <string>

#include "proto/caffe.pb.h"

namespace pstrain::unrolled {

// Appends a layer of `type` named `name` with the given bottoms and tops.
caffe::LayerParameter* Add(caffe::NetParameter* net, const std::string& type,
                           const std::string& name, std::initializer_list<std::string> bottoms,
                           std::initializer_list<std::string> tops);

// An InnerProduct over `axis` with `num_output` outputs whose parameters are
// shared by name (`weight`, and `bias` when not empty).
caffe::LayerParameter* AddProduct(caffe::NetParameter* net, const std::string& name,
                                  const std::string& bottom, const std::string& top, int axis,
                                  int num_output, const caffe::RecurrentParameter& p,
                                  const std::string& weight, const std::string& bias);

// Reshapes the static input's transform [N, K] to one timestep [1, N, K].
void AddStaticReshape(caffe::NetParameter* net, const std::string& name, const std::string& bottom,
                      const std::string& top, int num_output);

// The state and input names of timestep t.
inline std::string At(const std::string& base, int t) { return base + "_" + std::to_string(t); }

}  // namespace pstrain::unrolled
