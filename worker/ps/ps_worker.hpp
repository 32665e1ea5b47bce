// PsWorker: one training worker of a parameter-server job — the parameter
// server plugged into the one training loop (worker/trainer) as a
// Trainer::Callback. The trainer runs the forward and backward passes, tests,
// displays and checks for divergence; its local update is off (the servers
// apply the update rule) and so are its own snapshots.
//
// Per iteration t, as hooks of the loop:
//   OnStart(t)            wait for the weights of t (pulled during t-1); at a
//                         snapshot barrier worker 0 writes the checkpoint
//   OnLastForward(t)      bsp: ask for the weights of t+1 already
//                         (each shard answers a chunk once this worker pushed
//                         its gradient and the step is applied)
//   AfterBackward(t, l)   push the gradients layer l owns the moment backward
//                         is done with them, so communication overlaps the rest
//                         of backward (GPU: copy them to pinned host memory on
//                         a side stream and push as each copy completes; an fc
//                         weight with sufficient factors: the factors)
//   OnGradientsReady(t)   push what is left (ssp/asp with clipping push every
//                         gradient here, with their sum of squares); otherwise
//                         ask for the weights of t+1
//   OnFinish(T)           wait for the acknowledgements; worker 0 waits for
//                         the final weights (a barrier: every worker done),
//                         writes the last checkpoint and reports the servers'
//                         statistics; after the final test Run stops the servers
// Pulled weights are written into the blobs' host data and reach the device by
// the blobs' lazy sync at the next forward. Worker 0 also sends the initial
// weights and evaluates the TEST-phase net every test_interval on the weights
// of one version; at snapshot iterations (where the servers hold every worker
// at one clock and write their shard files) it writes the .caffemodel, a
// deploy.prototxt and, last, the checkpoint manifest.
// Host aggregation (bsp, options.host_group, worker/ps/host_group.hpp): the
// workers of one host form a group; its leader (lowest rank) is the only one
// with a PsClient (client.rank: the group's index, client.world_size: the
// number of groups). Members publish their gradients to the group's shared
// memory in OnGradientsReady and read the weights from it in OnStart; the
// leader adds them to its own gradients, pushes once in OnGradientsReady (no
// per-layer pushes: the sum needs every member's backward) and publishes the
// weights it pulled in OnStart.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "common/rng.hpp"
#include "common/status.hpp"
#include "common/transport/context.hpp"
#include "worker/ps/device_gradients.hpp"
#include "worker/ps/elastic_exchange.hpp"
#include "worker/ps/gpu_region.hpp"
#include "worker/ps/host_group.hpp"
#include "worker/ps/ps_client.hpp"
#include "worker/ps/factor_broadcast.hpp"
#include "worker/ps/sufficient_factors.hpp"
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
  AutotuneOptions autotune;       // engine auto (worker/net_autotune.hpp), with kFast
  // EASGD / model averaging: local solver steps, an exchange every period
  // iterations (elastic_exchange.hpp); clocks then count exchanges.
  ElasticOptions elastic;
  // Push qualifying InnerProduct weight gradients as sufficient factors
  // (worker/ps/sufficient_factors.hpp): no host aggregation, no elastic
  // method, not ssp/asp with clip_gradients, not with GPU IPC pushes;
  // otherwise every gradient goes dense and on_notice says why.
  bool sufficient_factors = false;
  // Sufficient-factor broadcasting (worker/ps/factor_broadcast.hpp; needs
  // sufficient_factors, bsp, no clip_gradients, the CPU engine): the factored weights whose
  // relay is fewer bytes than the weight come back as every worker's factors
  // instead of values. verify_interval > 0: every that many iterations the
  // replica is compared with the shards' values (a difference: an error when
  // strict, else a warning and the shards' values win).
  bool factor_broadcast = false;
  int64_t factor_verify_interval = 0;
  bool factor_verify_strict = false;
  // Informational ('I') and warning ('W') lines: which weights go as factors.
  std::function<void(char level, const std::string& text)> on_notice;
  // MemoryData layers fed from .npy files (--memory-data), by layer name.
  std::vector<MemoryDataFiles> memory_data_files;
  // bsp host aggregation: with host_group.world_size > 0, host_group.rank and
  // world_size are this worker's rank and the job's W (the data shard), the
  // client's rank and world_size its group's index and the number of groups;
  // host_group.name "" : a group of one (it pushes alone). A member's client
  // options are not used to connect.
  HostGroupOptions host_group;
  // Forward starts before the whole pull is in: before layer i's forward only
  // the chunks of the PS params layer i reads are waited for
  // (PsClient::WaitParams); the pull completes (version, checkpoint files)
  // after the last forward, before backward. The weights each layer computes
  // with are the same; only the timing changes. Where it cannot apply (GPU
  // engine, host aggregation, EASGD / model averaging) the whole pull is
  // waited for before forward; worker 0 also waits for all of it at its test
  // and snapshot iterations. The shards should run --pull-overlap (replies in
  // forward order).
  bool pull_overlap = false;
  std::function<void(const TrainEvent&)> on_event;
};

class PsWorker : public Trainer::Callback {
 public:
  // `context` must outlive the worker.
  static Result<std::unique_ptr<PsWorker>> Create(transport::Context& context,
                                                  const PsWorkerOptions& options);
  PsWorker(const PsWorker&) = delete;
  PsWorker& operator=(const PsWorker&) = delete;

  // Trains from the servers' clock to max_iter; worker 0 then snapshots and
  // stops the servers.
  Status Run();

 private:
  // Trainer::Callback, called by trainer_'s loop only.
  Status OnStart(int iter) override;
  Status OnLastForward(int iter) override;
  Status AfterBackward(int iter, int layer) override;
  Status OnGradientsReady(int iter) override;
  void OnEvent(TrainEvent* event) override;
  Status OnFinish(int iter) override;

  PsWorker() = default;
  // Asks for the weights of iteration `iter` when anyone will use them: every
  // worker before max_iter, worker 0 also at max_iter (the final weights).
  Status PullFor(int iter);
  // Pushes the device gradients whose copies to pinned memory are done
  // (`wait`: waits for every copy started).
  Status PushCopied(int iter, bool wait);
  // Turns sufficient factors on where they may be (see PsWorkerOptions).
  void SetUpFactors();
  // pull_overlap: which PS params each layer reads (params_of_layer_) and the
  // before_forward hook that waits for them.
  void SetUpOverlap();
  // pull_overlap: whether OnStart(iter) must wait for the whole pull (worker
  // 0 tests or snapshots at iter: they read every weight).
  bool WholePullAt(int iter) const;
  // pull_overlap: completes the pull OnStart left open (after the last forward).
  Status FinishPull(int iter);
  // GPU IPC pushes (ps_worker_gpu_ipc.cpp): a GPU worker that may use them
  // makes its region and puts the offer into `client`. Otherwise a GPU
  // worker's notice says why not; with transport.gpu_ipc true it is any
  // worker's error ("transport.gpu_ipc is true but the worker runs on the
  // CPU engine"). After Hello, UseGpuPath keeps the region only when every
  // shard accepted, and says so.
  Status OfferGpuIpc(PsClientOptions* client);
  void UseGpuPath();
  void Notice(char level, const std::string& text) const;
  Status WriteSnapshot(int64_t iter, const std::vector<std::string>& shard_files);
  // Worker 0 at the end: the servers' statistics as a server_stats event.
  void EmitServerStats(int iter);
  // OnFinish with an ElasticExchange: the last exchange, then worker 0 the center.
  Status FinishElastic(int iter);
  void Emit(TrainEvent event) const;
  // This worker's rank and the job's W (the data shard, the manifest).
  int rank() const;
  int world_size() const;
  bool member() const { return group_ && !group_->leader(); }

  PsWorkerOptions options_;
  std::unique_ptr<Trainer> trainer_;
  std::unique_ptr<PsClient> client_;
  std::vector<int> ps_param_of_learnable_;  // learnable index -> PS param index, or -1
  std::vector<std::vector<int>> push_after_layer_;  // layer index -> PS params final there
  std::unique_ptr<DeviceGradients> device_gradients_;  // GPU engine only
  std::unique_ptr<GpuGradientRegion> gpu_region_;      // GPU IPC pushes only
  std::unique_ptr<ElasticExchange> exchange_;          // EASGD / model averaging only
  std::unique_ptr<FactorCapture> factors_;  // --sufficient-factors, where weights qualify
  std::unique_ptr<FactorBroadcast> broadcast_;  // --factor-broadcast, where weights qualify
  std::vector<optim::ParamHyper> param_hyper_;  // per PS param: lr_mult, decay_mult
  std::vector<std::string> ps_names_;           // per PS param
  // Sets up broadcast_ over factors_'s weights where the relay is fewer bytes.
  Status SetUpBroadcast();
  std::unique_ptr<HostGroup> group_;                   // host aggregation only
  std::vector<Blob*> ps_blobs_;                        // the PS params' blobs, in order
  std::vector<int> all_params_;                        // 0..P-1
  int start_iter_ = 0;
  bool clip_at_end_ = false;  // ssp/asp with clip_gradients: every push at the end
  bool early_pull_ = false;   // bsp: pull t+1 before the last backward
  bool overlap_ = false;      // options_.pull_overlap where it applies
  LayerHooks hooks_;          // the train net's hooks (factors, overlap)
  std::vector<std::vector<int>> params_of_layer_;  // layer index -> PS params it reads
  bool pull_open_ = false;    // overlap: OnStart left the pull to the layers and FinishPull
  Status layer_wait_;         // overlap: the first failed WaitParams of this forward
  Rng straggle_rng_{0};
  int64_t version_ = 0;        // of the weights the current iteration trains on
  PsTraffic display_traffic_;  // at the previous train event
};

}  // namespace pstrain
