// PsWorker: one training worker of a parameter-server job.
//
// Per iteration t: wait for the weights of t (pulled at the end of t-1),
// forward, backward — each parameter's gradient is pushed the moment the
// backward pass is done with it, so communication overlaps the rest of
// backward — then ask for the weights of t+1. On the GPU engine the gradients
// are copied to pinned host memory on a side stream and pushed as each copy
// completes (DeviceGradients); pulled weights are written into the blobs'
// host data and reach the device by the blobs' lazy sync at the next forward.
// Worker 0 also sends the initial weights, evaluates the TEST-phase net every
// test_interval on the weights of one version, and at snapshot iterations
// (where the servers hold every worker at one clock and write their shard
// files) writes the .caffemodel, a deploy.prototxt and, last, the checkpoint
// manifest.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "common/status.hpp"
#include "common/transport/context.hpp"
#include "worker/device_gradients.hpp"
#include "worker/ps_client.hpp"
#include "worker/trainer.hpp"

namespace pstrain {

struct PsWorkerOptions {
  std::string solver_path;
  PsClientOptions client;       // client.mode: bsp | ssp | asp (clipping in ssp/asp pushes at the end)
  std::string weights;          // rank 0, fresh job: initial weights (.caffemodel)
  int staleness = 0;
  int straggle_ms = 0;          // sleep this long every iteration (experiments)
  int straggle_jitter_ms = 0;   // plus a uniform random [0, jitter] ms
  Engine engine = Engine::kFast;  // kGpu: the caller has selected the device (UseCudaDevice)
  std::function<void(const TrainEvent&)> on_event;
};

class PsWorker {
 public:
  // `context` must outlive the worker.
  static Result<std::unique_ptr<PsWorker>> Create(transport::Context& context,
                                                  const PsWorkerOptions& options);
  // Trains until max_iter; worker 0 then snapshots and stops the servers.
  Status Run();

 private:
  PsWorker() = default;
  Status WriteSnapshot(int64_t iter, const std::vector<std::string>& shard_files);
  void Emit(TrainEvent event) const;

  PsWorkerOptions options_;
  std::unique_ptr<Trainer> trainer_;
  std::unique_ptr<PsClient> client_;
  std::vector<int> ps_param_of_learnable_;  // learnable index -> PS param index, or -1
  std::vector<std::vector<int>> push_after_layer_;  // layer index -> PS params final there
  std::unique_ptr<DeviceGradients> device_gradients_;  // GPU engine only
};

}  // namespace pstrain
