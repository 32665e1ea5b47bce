// Deploy nets: the inference form of a training net, as people write
// deploy.prototxt by hand for Caffe and OpenCV — data layers become Input
// layers (batch 1, the shapes the built net feeds), loss and accuracy layers
// are removed, and a loss that read class scores (SoftmaxWithLoss) is
// replaced by a Softmax named "prob". Layers that only fed removed layers
// (labels) go too. Include/exclude rules are dropped.
#pragma once

#include "common/status.hpp"
#include "proto/caffe.pb.h"
#include "worker/net.hpp"

namespace pstrain {

// `net` is a built TEST-phase (or TRAIN-phase) net; its param() (filtered,
// upgraded, with splits) is the source. Split layers are not written.
Result<caffe::NetParameter> MakeDeployNet(const Net& net);

}  // namespace pstrain
