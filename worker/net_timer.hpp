// NetTimer: per-layer forward and backward times of a net, like `caffe time`.
// One warm-up iteration is run and not counted; then `iterations` timed
// forward+backward passes. Backward runs on every layer, so nets without a
// loss (deploy nets) are timed too; a bottom gets a gradient when a layer
// upstream of it has parameters (so the input image does not), as in training.
//
// On the GPU (a sync given) the per-layer rows come from passes that wait
// after every layer, which a training iteration never does; so the
// iteration's total is timed apart, over `iterations` whole passes that wait
// once, at their end (NetTime::whole_passes), optionally each launched as one
// CUDA graph (NetTimerOptions::run_whole_pass, worker/cuda_graph_pass.hpp).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "common/status.hpp"
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
  double forward_ms = 0;  // mean per iteration: the layer rows' sum
  double backward_ms = 0;
  double total_ms = 0;         // mean forward+backward per iteration
  double median_total_ms = 0;  // median forward+backward per iteration
  int iterations = 0;
  // True: total_ms and median_total_ms come from whole passes timed apart
  // from the layer rows (one wait per pass); false: from the layer rows' passes.
  bool whole_passes = false;
};

struct NetTimerOptions {
  // Called after every layer's Forward and Backward in the per-layer passes,
  // and after every whole pass, before the clock stops (GPU engine: wait for
  // the queued kernels). Empty (CPU): the totals come from the per-layer passes.
  std::function<void()> sync;
  // With a sync: queues one whole pass (forward of every layer, then backward)
  // given as its argument, e.g. through CudaGraphPass::Run. Called once
  // untimed before the timed whole passes. Empty: the pass is called directly.
  std::function<Status(const std::function<void()>& pass)> run_whole_pass;
};

// The bottoms whose gradient TimeNet computes, per layer (net.bottom_vecs()
// order): a bottom gets one when a layer upstream of it has parameters and the
// layer allows it (AllowForceBackward), whether or not a loss follows. Engine
// auto times the same passes for ps-net time (AutotuneOptions::backward).
std::vector<std::vector<bool>> TimedPropagateDown(const Net& net);

// An error of run_whole_pass is returned as it is.
Result<NetTime> TimeNet(Net& net, int iterations, const NetTimerOptions& options);
// As above with only a sync (never fails then).
NetTime TimeNet(Net& net, int iterations, const std::function<void()>& sync = {});

// Sets the batch (first) dimension of every Input, DummyData and Data layer.
// REQUIRES: `net` is in the current (upgraded) format.
void OverrideBatchSize(caffe::NetParameter* net, int batch);

}  // namespace pstrain
