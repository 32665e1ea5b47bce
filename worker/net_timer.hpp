// NetTimer: per-layer forward and backward times of a net, like `caffe time`.
// One warm-up iteration is run and not counted; then `iterations` timed
// forward+backward passes. Backward runs on every layer, so nets without a
// loss (deploy nets) are timed too; a bottom gets a gradient when a layer
// upstream of it has parameters (so the input image does not), as in training.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "worker/net.hpp"

namespace pstrain {

struct LayerTime {
  std::string name;
  std::string type;
  double forward_ms = 0;  // mean over the timed iterations
  double backward_ms = 0;
  std::string implementation;  // Layer::Implementation() during the timed passes
};

struct NetTime {
  std::vector<LayerTime> layers;
  double forward_ms = 0;  // mean per iteration
  double backward_ms = 0;
  double total_ms = 0;         // mean forward+backward per iteration
  double median_total_ms = 0;  // median forward+backward per iteration
  int iterations = 0;
};

// The bottoms whose gradient TimeNet computes, per layer (net.bottom_vecs()
// order): a bottom gets one when a layer upstream of it has parameters and the
// layer allows it (AllowForceBackward), whether or not a loss follows. Engine
// auto times the same passes for ps-net time (AutotuneOptions::backward).
std::vector<std::vector<bool>> TimedPropagateDown(const Net& net);

// `sync`, when given, is called after every layer's Forward and Backward
// before its clock stops (GPU engine: wait for the queued kernels).
NetTime TimeNet(Net& net, int iterations, const std::function<void()>& sync = {});

// Sets the batch (first) dimension of every Input, DummyData and Data layer.
// REQUIRES: `net` is in the current (upgraded) format.
void OverrideBatchSize(caffe::NetParameter* net, int batch);

}  // namespace pstrain
