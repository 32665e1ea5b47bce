#include "worker/ps/ps_worker.hpp"

#include <chrono>
#include <filesystem>
#include <map>
#include <thread>

#include "common/optim/solver_proto.hpp"
#include "common/proto_io.hpp"
#include "common/ps/factor_relay.hpp"
#include "common/ps/sufficient_factors.hpp"
#include "worker/caffe_hdf5.hpp"
#include "worker/deploy.hpp"

namespace pstrain {

Result<std::unique_ptr<PsWorker>> PsWorker::Create(transport::Context& context,
                                                   const PsWorkerOptions& options) {
  std::unique_ptr<PsWorker> worker(new PsWorker());
  worker->options_ = options;
  // Host groups in use (host_group.world_size > 0): the client counts groups,
  // the data shard counts workers. A group of one has no segment (name "").
  const bool groups = options.host_group.world_size > 0;
  const bool grouped = !options.host_group.name.empty();
  if (groups && (options.client.mode != ConsistencyMode::kBsp ||
                 options.elastic.method != ElasticOptions::Method::kNone)) {
    return Status::InvalidArgument(
        "host aggregation (--host-groups) needs mode bsp without EASGD or model averaging");
  }
  const int rank = groups ? options.host_group.rank : options.client.rank;
  TrainerOptions trainer_options;
  trainer_options.engine = options.engine;
  trainer_options.autotune = options.autotune;
  trainer_options.context.rank = rank;
  trainer_options.context.world_size =
      groups ? options.host_group.world_size : options.client.world_size;
  trainer_options.context.memory_data_files = options.memory_data_files;
  trainer_options.on_event = options.on_event;
  // The servers apply the update rule; with EASGD / model averaging each
  // worker's own solver does, and the servers keep the center.
  const bool elastic = options.elastic.method != ElasticOptions::Method::kNone;
  trainer_options.apply_updates = elastic;
  trainer_options.run_tests = rank == 0;
  trainer_options.write_snapshots = false;  // checkpoints are the servers' barriers
  // Only worker 0's initial weights count (--weights, else the solver's
  // `weights` fields): they become the servers' first values.
  trainer_options.load_weights = rank == 0;
  trainer_options.weights = options.weights;
  PSTRAIN_ASSIGN_OR_RETURN(worker->trainer_,
                           Trainer::FromFile(options.solver_path, trainer_options));
  // The servers hold every parameter that learns (lr_mult != 0). Parameters
  // with lr_mult 0 (BatchNorm statistics, frozen layers) stay local.
  Net& net = worker->trainer_->net();
  std::vector<PsParam> params;
  worker->push_after_layer_.assign(net.layers().size(), {});
  for (const auto& p : net.learnable_params()) {
    if (p.lr_mult == 0.f) {
      worker->ps_param_of_learnable_.push_back(-1);
      continue;
    }
    const int id = static_cast<int>(params.size());
    worker->ps_param_of_learnable_.push_back(id);
    worker->push_after_layer_[p.layer_index].push_back(id);
    worker->all_params_.push_back(id);
    worker->ps_blobs_.push_back(p.blob);
    worker->param_hyper_.push_back({p.lr_mult, p.decay_mult});
    worker->ps_names_.push_back(p.name);
    params.push_back({p.name, p.blob, p.lr_mult, p.decay_mult});
  }
  if (grouped) {
    int64_t values = 0;
    for (const Blob* b : worker->ps_blobs_) values += b->count();
    PSTRAIN_ASSIGN_OR_RETURN(worker->group_, HostGroup::Open(options.host_group, values));
  }
  PsClientOptions client_options = options.client;
  if (!worker->member()) PSTRAIN_RETURN_IF_ERROR(worker->OfferGpuIpc(&client_options));
  if (!worker->member()) {
    PSTRAIN_ASSIGN_OR_RETURN(worker->client_,
                             PsClient::Connect(context, client_options, std::move(params)));
  }
  const caffe::SolverParameter& solver = worker->trainer_->solver();
  worker->clip_at_end_ =
      solver.clip_gradients() >= 0 && options.client.mode != ConsistencyMode::kBsp;
  // bsp: the next pull goes out before the last backward, so that the weights
  // of the layers pushed first travel while backward still runs. GPU workers
  // too: a reply lands in the host copy of a weight whose gradient was pushed,
  // so its layer's backward has run on the device (the push followed the
  // copy of its gradient), and the device copy is replaced only at the next
  // forward's upload. The host write waits for that weight's last upload
  // alone (SyncedMemory), not for the backward still queued.
  worker->early_pull_ = options.client.mode == ConsistencyMode::kBsp && !elastic;
  if (elastic) {
    std::vector<Blob*> blobs;
    for (const auto& p : net.learnable_params()) {
      if (p.lr_mult != 0.f) blobs.push_back(p.blob);
    }
    PsWorker* self = worker.get();
    worker->exchange_ = std::make_unique<ElasticExchange>(
        options.elastic, worker->client_.get(), std::move(blobs), options.client.world_size,
        [self](int64_t version, const std::vector<std::string>& files) {
          self->version_ = version;
          if (self->rank() != 0 || files.empty()) return Status::Ok();
          return self->WriteSnapshot(self->trainer_->iter(), files);
        });
  }
  worker->SetUpFactors();
  // Grouped workers hand whole gradients over through host memory (the blobs'
  // lazy sync), not per layer. A weight pushed as factors needs no copy.
  if (worker->trainer_->engine() == Engine::kGpu && !grouped) {
    std::vector<Blob*> blobs = worker->ps_blobs_;
    if (worker->factors_) {
      for (const FactorCapture::WeightShape& s : worker->factors_->shapes()) {
        blobs[static_cast<size_t>(s.param)] = nullptr;
      }
    }
    PSTRAIN_ASSIGN_OR_RETURN(worker->device_gradients_, DeviceGradients::Create(blobs));
  }
  PSTRAIN_RETURN_IF_ERROR(worker->SetUpBroadcast());
  // GPU workers too: a pulled blob is copied to the device when its layer first
  // reads it (SyncedMemory's lazy upload), after that layer's wait. Not with
  // factor broadcast: a broadcast weight's values exist only once the whole
  // pull is in (every shard's relay, FactorBroadcast::Finish).
  worker->overlap_ = options.pull_overlap && worker->client_ && !elastic && !worker->group_ &&
                     !worker->broadcast_;
  if (options.pull_overlap && worker->broadcast_ && options.on_notice) {
    options.on_notice('W', "pull overlap: off with factor broadcast (the replica steps once "
                           "the whole pull is in)");
  }
  if (worker->overlap_) worker->SetUpOverlap();
  net.set_layer_hooks(worker->hooks_);
  worker->straggle_rng_ = Rng(MixSeed(static_cast<uint64_t>(solver.random_seed()), 1000 + rank));
  worker->trainer_->add_callback(worker.get());
  return worker;
}

void PsWorker::SetUpFactors() {
  if (!options_.sufficient_factors) return;
  auto notice = [this](char level, const std::string& text) {
    if (options_.on_notice) options_.on_notice(level, "sufficient factors: " + text);
  };
  // GPU workers push factors too: the capture reads the layer's top diff and
  // bottom data back from the device (SyncedMemory), the rest goes through
  // DeviceGradients. GPU IPC pushes, when the shards take them, turn it off
  // (UseGpuPath).
  const char* why_not = group_         ? "off with host aggregation (a host's sum goes dense)"
                        : exchange_    ? "off with an elastic method (it pushes weight deltas)"
                        : clip_at_end_ ? "off in ssp/asp with clip_gradients (every gradient "
                                         "goes dense with its norm)"
                                       : nullptr;
  if (why_not != nullptr) {
    notice('W', why_not);
    return;
  }
  Net& net = trainer_->net();
  factors_ = FactorCapture::Create(net, ps_param_of_learnable_, trainer_->iter_size(),
                                   client_->placement(), FactorDtype(options_.client.compression));
  if (!factors_) {
    notice('I', "no InnerProduct weight whose factors are fewer bytes than its gradient");
    return;
  }
  for (const std::string& line : factors_->summary()) notice('I', line);
  factors_->SkipDenseGradients(&net);
#ifdef PSTRAIN_HAVE_CUDA
  // Nothing writes such a weight's diff any more: on the GPU engine keep it on
  // the device, where ClearParamDiffs zeroes it with a device fill rather than
  // a host memset of the whole weight every iteration.
  if (trainer_->engine() == Engine::kGpu) {
    for (const FactorCapture::WeightShape& s : factors_->shapes()) {
      ps_blobs_[static_cast<size_t>(s.param)]->mutable_gpu_diff();
    }
  }
#endif
  hooks_.after_backward = [capture = factors_.get()](int layer) { capture->Captured(layer); };
}

void PsWorker::SetUpOverlap() {
  Net& net = trainer_->net();
  std::map<const Blob*, int> ps_param_of_blob;
  for (size_t i = 0; i < ps_blobs_.size(); ++i) ps_param_of_blob[ps_blobs_[i]] = static_cast<int>(i);
  // A shared parameter is one blob in every layer that reads it: each waits.
  params_of_layer_.assign(net.layers().size(), {});
  for (size_t i = 0; i < net.layers().size(); ++i) {
    for (const auto& blob : net.layers()[i]->blobs()) {
      auto it = ps_param_of_blob.find(blob.get());
      if (it != ps_param_of_blob.end()) params_of_layer_[i].push_back(it->second);
    }
  }
  hooks_.before_forward = [this](int layer) {
    const std::vector<int>& ids = params_of_layer_[static_cast<size_t>(layer)];
    if (!pull_open_ || ids.empty() || !layer_wait_.ok()) return;
    // An error stops nothing here (a hook returns nothing): FinishPull returns it
    // before backward, so no gradient of this forward is pushed.
    layer_wait_ = client_->WaitParams(ids);
  };
}

bool PsWorker::WholePullAt(int iter) const {
  if (rank() != 0) return false;  // only worker 0 tests and snapshots
  const caffe::SolverParameter& solver = trainer_->solver();
  const bool test = solver.test_interval() > 0 && iter % solver.test_interval() == 0 &&
                    (iter > 0 || solver.test_initialization()) && trainer_->test_net() != nullptr;
  const bool snapshot = solver.snapshot() > 0 && iter > 0 && iter % solver.snapshot() == 0;
  return test || snapshot;
}

Status PsWorker::FinishPull(int iter) {
  if (!pull_open_) return Status::Ok();
  pull_open_ = false;
  PSTRAIN_RETURN_IF_ERROR(layer_wait_);
  std::vector<std::string> shard_files;
  PSTRAIN_RETURN_IF_ERROR(client_->WaitPull(&version_, &shard_files));
  if (rank() == 0 && !shard_files.empty() && iter > 0) {
    // The snapshot must hold the weights from before this forward (BatchNorm's
    // running statistics move in forward): only the solver's snapshot
    // iterations are known ahead (WholePullAt).
    return Status::FailedPrecondition(
        "pull overlap: the servers cut a checkpoint at iteration " + std::to_string(iter) +
        " that is not a snapshot iteration of the solver (a driver's GATE checkpoint?); run "
        "the workers without --pull-overlap");
  }
  return Status::Ok();
}

Status PsWorker::SetUpBroadcast() {
  if (!options_.factor_broadcast) return Status::Ok();
  auto notice = [this](char level, const std::string& text) {
    if (options_.on_notice) options_.on_notice(level, "factor broadcast: " + text);
  };
  if (!factors_) {
    notice('W', "off: no weight is pushed as factors (pulls go dense)");
    return Status::Ok();
  }
  if (trainer_->engine() == Engine::kGpu) {
    notice('W', "off on the GPU engine: the replica's rebuild and step run on CPU workers "
                "only (pulls go dense)");
    return Status::Ok();
  }
  const caffe::SolverParameter& solver = trainer_->solver();
  if (options_.client.mode != ConsistencyMode::kBsp || solver.clip_gradients() >= 0) {
    notice('W', "off: it needs bsp without clip_gradients (pulls go dense)");
    return Status::Ok();
  }
  const KeyPlacement& placement = client_->placement();
  const int workers = options_.client.world_size;
  std::vector<FactorBroadcast::Weight> weights;
  for (const FactorCapture::WeightShape& s : factors_->shapes()) {
    // The factors as pushed (16-bit with fp16/bf16 pushes) against the
    // weight's chunks as pulled (16-bit with fp16/bf16 pulls).
    const int64_t relay = RelayBytes(placement, s.param, s.cols, s.samples, workers,
                                     FactorDtype(options_.client.compression));
    int64_t dense = 0;
    for (uint32_t id : placement.param_chunks(s.param)) {
      dense += FactorFrameBytes(options_.client.pull_compression, placement.chunk(id).length);
    }
    const std::string& name = ps_names_[static_cast<size_t>(s.param)];
    if (relay >= dense) {
      notice('I', name + " pulls dense: the relay of " + std::to_string(workers) +
                      " workers' factors is " + std::to_string(relay) + " bytes, the weight " +
                      std::to_string(dense));
      continue;
    }
    notice('I', name + ": " + std::to_string(relay) + " bytes of factors pulled instead of " +
                    std::to_string(dense));
    weights.push_back({s.param, ps_blobs_[static_cast<size_t>(s.param)], s.cols});
  }
  if (weights.empty()) return Status::Ok();
  PSTRAIN_ASSIGN_OR_RETURN(optim::SolverHyper hyper, optim::SolverHyperFromProto(solver));
  FactorBroadcastOptions o;
  o.num_workers = workers;
  o.verify_interval = options_.factor_verify_interval;
  o.strict = options_.factor_verify_strict;
  o.rights_ahead = options_.client.factor_right_holder;
  o.on_notice = [notice](const std::string& text) { notice('W', text); };
  PSTRAIN_ASSIGN_OR_RETURN(broadcast_, FactorBroadcast::Create(placement, std::move(weights),
                                                               param_hyper_, hyper, std::move(o)));
  client_->set_factor_broadcast(broadcast_.get());
  return Status::Ok();
}

void PsWorker::Emit(TrainEvent event) const {
  if (options_.on_event) options_.on_event(event);
}

int PsWorker::rank() const {
  return options_.host_group.world_size > 0 ? options_.host_group.rank : options_.client.rank;
}

int PsWorker::world_size() const {
  return options_.host_group.world_size > 0 ? options_.host_group.world_size
                                            : options_.client.world_size;
}

Status PsWorker::Run() {
  if (member()) {
    // Train from the weights the group's leader holds now.
    int64_t iter = 0;
    PSTRAIN_RETURN_IF_ERROR(group_->Join(&iter));
    start_iter_ = static_cast<int>(iter);
    trainer_->StartAt(start_iter_);
    return trainer_->Solve();
  }
  int64_t clock = 0;
  PSTRAIN_RETURN_IF_ERROR(client_->Hello(&clock));
  UseGpuPath();
  if (rank() == 0 && clock == 0) PSTRAIN_RETURN_IF_ERROR(client_->InitPush());
  // Continue the data stream where this worker's clock says it stopped (with
  // an exchange period, clocks count exchanges).
  start_iter_ = static_cast<int>(clock) * (exchange_ ? options_.elastic.period : 1);
  trainer_->StartAt(start_iter_);
  PSTRAIN_RETURN_IF_ERROR(client_->Pull(clock));
  display_traffic_ = client_->traffic();
  PSTRAIN_RETURN_IF_ERROR(trainer_->Solve());
  if (group_) group_->Unlink();
  // Worker 0 stops the servers once it has tested and reported the end.
  return rank() == 0 ? client_->Shutdown() : Status::Ok();
}

Status PsWorker::PullFor(int iter) {
  if (iter < trainer_->solver().max_iter() || rank() == 0) {
    // R pushed once: the last step's R's reach every shard through worker 0,
    // the only worker that pulls max_iter.
    if (iter >= trainer_->solver().max_iter()) client_->set_forward_all(true);
    return client_->Pull(iter);
  }
  return Status::Ok();
}

Status PsWorker::OnStart(int iter) {
  if (factors_) factors_->StartIteration();
  if (member()) {
    PSTRAIN_RETURN_IF_ERROR(group_->ReadWeights(iter, ps_blobs_, &version_));
  } else if (exchange_ && iter != start_iter_) {
    if (iter % options_.elastic.period == 0) {
      PSTRAIN_RETURN_IF_ERROR(exchange_->Exchange(iter / options_.elastic.period - 1));
    }
  } else if (overlap_ && !WholePullAt(iter)) {
    // Forward waits layer by layer (hooks_.before_forward), FinishPull for the
    // rest. The diffs pushed without a copy must be let go of first: the
    // trainer zeroes them before forward (Trainer::ForwardBackward).
    PSTRAIN_RETURN_IF_ERROR(client_->ReleaseDiffs());
    pull_open_ = true;
    layer_wait_ = Status::Ok();
  } else {
    std::vector<std::string> shard_files;
    PSTRAIN_RETURN_IF_ERROR(client_->WaitPull(&version_, &shard_files));
    if (group_) PSTRAIN_RETURN_IF_ERROR(group_->PublishWeights(iter, version_, ps_blobs_));
    if (rank() == 0 && !shard_files.empty() && iter > 0) {
      PSTRAIN_RETURN_IF_ERROR(WriteSnapshot(iter, shard_files));
    }
    if (exchange_) exchange_->Started();
  }
  if (options_.straggle_ms > 0 || options_.straggle_jitter_ms > 0) {
    int delay = options_.straggle_ms;
    if (options_.straggle_jitter_ms > 0) {
      delay += static_cast<int>(straggle_rng_.Below(options_.straggle_jitter_ms + 1));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(delay));
  }
  return Status::Ok();
}

Status PsWorker::OnLastForward(int iter) {
  PSTRAIN_RETURN_IF_ERROR(FinishPull(iter));  // before backward writes diffs
  // The shards answer chunk by chunk as each chunk's step is applied, which
  // needs this worker's push of it: the weights backward still reads are
  // never overwritten.
  return early_pull_ && !exchange_ && !member() ? PullFor(iter + 1) : Status::Ok();
}

Status PsWorker::AfterBackward(int iter, int layer) {
  const std::vector<int>& ids = push_after_layer_[layer];
  if (clip_at_end_ || ids.empty() || exchange_ || group_) return Status::Ok();
  if (gpu_region_) {  // GPU IPC: the shards read the values from the region
    PSTRAIN_RETURN_IF_ERROR(gpu_region_->Start(ids));
    return client_->PushIpc(ids, iter, gpu_region_->offsets());
  }
  std::vector<int> dense;
  if (factors_) {
    for (int id : ids) {
      const GradientFactors f = factors_->factors(id);
      if (f.samples == 0) {
        dense.push_back(id);
      } else {
        PSTRAIN_RETURN_IF_ERROR(
            client_->PushFactors(id, iter, f, broadcast_ && broadcast_->Broadcasts(id)));
      }
    }
    if (dense.empty()) return Status::Ok();
  }
  const std::vector<int>& rest = factors_ ? dense : ids;
  if (!device_gradients_) return client_->Push(rest, iter, -1.0);
  // Copy the layer's gradients out on the side stream; push the ones whose
  // copies are done as backward goes on, the rest in OnGradientsReady.
  device_gradients_->Start(rest);
  return PushCopied(iter, /*wait=*/false);
}

Status PsWorker::PushCopied(int iter, bool wait) {
  return device_gradients_->Drain(
      wait, [&](const std::vector<int>& done, const std::vector<const float*>& diffs) {
        return client_->Push(done, iter, -1.0, diffs);
      });
}

Status PsWorker::OnGradientsReady(int iter) {
  if (exchange_) return Status::Ok();  // the local solver steps; exchanges in OnStart
  if (member()) return group_->PublishGradient(iter, ps_blobs_);
  if (group_) {
    // The group's sum, in rank order, pushed once.
    PSTRAIN_RETURN_IF_ERROR(group_->SumGradients(iter, ps_blobs_));
    PSTRAIN_RETURN_IF_ERROR(client_->Push(all_params_, iter, -1.0));
  } else if (clip_at_end_) {
    std::vector<int> all;
    double sum = 0;
    const auto& learnable = trainer_->net().learnable_params();
    for (size_t i = 0; i < ps_param_of_learnable_.size(); ++i) {
      if (ps_param_of_learnable_[i] < 0) continue;
      all.push_back(ps_param_of_learnable_[i]);
      sum += learnable[i].blob->SumSquaresDiff();
    }
    PSTRAIN_RETURN_IF_ERROR(client_->Push(all, iter, sum));
  } else if (device_gradients_) {
    PSTRAIN_RETURN_IF_ERROR(PushCopied(iter, /*wait=*/true));
  }
  return early_pull_ ? Status::Ok() : PullFor(iter + 1);
}

void PsWorker::OnEvent(TrainEvent* event) {
  if (event->kind == "done") {
    if (rank() == 0) event->values.push_back({"version", static_cast<double>(version_)});
    return;
  }
  if (event->kind != "train") return;
  const PsTraffic t = client_ ? client_->traffic() : PsTraffic{};
  event->values.push_back(
      {"pull_wait_seconds", t.pull_wait_seconds - display_traffic_.pull_wait_seconds});
  event->values.push_back(
      {"bytes_sent", static_cast<double>(t.bytes_sent - display_traffic_.bytes_sent)});
  event->values.push_back(
      {"bytes_received", static_cast<double>(t.bytes_received - display_traffic_.bytes_received)});
  event->values.push_back({"staleness", static_cast<double>(event->iter - version_)});
  display_traffic_ = t;
}

Status PsWorker::FinishElastic(int iter) {
  const int period = options_.elastic.period;
  if (iter % period != 0) {
    return Status::InvalidArgument("max_iter " + std::to_string(iter) +
                                   " is not a multiple of the exchange period " +
                                   std::to_string(period));
  }
  if (iter > start_iter_) PSTRAIN_RETURN_IF_ERROR(exchange_->Exchange(iter / period - 1));
  PSTRAIN_RETURN_IF_ERROR(client_->Flush());
  if (rank() != 0) return Status::Ok();
  // Worker 0 tests and snapshots the center (model averaging pulled it already).
  if (options_.elastic.method == ElasticOptions::Method::kEasgd) {
    PSTRAIN_RETURN_IF_ERROR(client_->Pull(iter / period));
    std::vector<std::string> shard_files;
    PSTRAIN_RETURN_IF_ERROR(client_->WaitPull(&version_, &shard_files));
    if (!shard_files.empty()) PSTRAIN_RETURN_IF_ERROR(WriteSnapshot(iter, shard_files));
  }
  EmitServerStats(iter);
  return Status::Ok();
}

Status PsWorker::OnFinish(int iter) {
  if (exchange_) return FinishElastic(iter);
  if (member()) return Status::Ok();
  PSTRAIN_RETURN_IF_ERROR(client_->Flush());
  if (rank() != 0) return Status::Ok();

  // Worker 0: the final weights are a barrier at max_iter (every worker done).
  std::vector<std::string> shard_files;
  PSTRAIN_RETURN_IF_ERROR(client_->WaitPull(&version_, &shard_files));
  if (trainer_->solver().snapshot_after_train() || !shard_files.empty()) {
    PSTRAIN_RETURN_IF_ERROR(WriteSnapshot(iter, shard_files));
  }
  EmitServerStats(iter);
  return Status::Ok();
}

void PsWorker::EmitServerStats(int iter) {
  auto stats = client_->Stats();
  if (stats.ok()) {
    int64_t staleness_max = 0, bad = 0, ipc = 0;
    for (const auto& s : stats.value()) {
      staleness_max = std::max(staleness_max, s.staleness_max());
      bad += s.bad_messages();
      ipc += s.gpu_ipc_pushes();
    }
    Emit({"server_stats",
          iter,
          {{"version", static_cast<double>(version_)},
           {"staleness_max", static_cast<double>(staleness_max)},
           {"bad_messages", static_cast<double>(bad)},
           {"gpu_ipc_pushes", static_cast<double>(ipc)}},
          ""});
  }
}

Status PsWorker::WriteSnapshot(int64_t iter, const std::vector<std::string>& shard_files) {
  const caffe::SolverParameter& solver = trainer_->solver();
  const std::string base = solver.snapshot_prefix() + "_iter_" + std::to_string(iter);
  const std::filesystem::path parent = std::filesystem::path(base).parent_path();
  std::error_code ec;
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  const std::string model = base + ".caffemodel" + SnapshotSuffix(solver);
  PSTRAIN_RETURN_IF_ERROR(trainer_->net().WriteSnapshotModel(model, solver.snapshot_diff()));
  const Net* source = trainer_->test_net() ? trainer_->test_net() : &trainer_->net();
  const std::string deploy_path = solver.snapshot_prefix() + "_deploy.prototxt";
  auto deploy = MakeDeployNet(*source);
  if (deploy.ok()) PSTRAIN_RETURN_IF_ERROR(WriteTextProto(deploy.value(), deploy_path));
  pstrain::CheckpointManifest manifest;
  manifest.set_iter(iter);
  manifest.set_num_shards(static_cast<int>(options_.client.servers.size()));
  for (const auto& f : shard_files) manifest.add_shard_files(f);
  manifest.set_caffemodel(model);
  if (deploy.ok()) manifest.set_deploy_prototxt(deploy_path);
  manifest.set_mode(ModeName(options_.client.mode));
  manifest.set_staleness(options_.staleness);
  manifest.set_workers(world_size());
  PSTRAIN_RETURN_IF_ERROR(WriteTextProto(manifest, base + ".manifest"));
  Emit({"snapshot", static_cast<int>(iter), {}, model});
  return Status::Ok();
}

}  // namespace pstrain
