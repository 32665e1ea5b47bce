#include "worker/ps_worker.hpp"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <thread>

#include "common/proto_io.hpp"
#include "worker/deploy.hpp"
#include "worker/layers/data_layer.hpp"

namespace pstrain {

using Clock = std::chrono::steady_clock;

Result<std::unique_ptr<PsWorker>> PsWorker::Create(transport::Context& context,
                                                   const PsWorkerOptions& options) {
  std::unique_ptr<PsWorker> worker(new PsWorker());
  worker->options_ = options;
  TrainerOptions trainer_options;
  trainer_options.engine = options.engine;
  trainer_options.context.rank = options.client.rank;
  trainer_options.context.world_size = options.client.world_size;
  trainer_options.on_event = options.on_event;
  PSTRAIN_ASSIGN_OR_RETURN(worker->trainer_,
                           Trainer::FromFile(options.solver_path, trainer_options));
  if (options.client.rank != 0 || options.weights.empty()) {
    // Only worker 0's initial weights count.
  } else {
    PSTRAIN_RETURN_IF_ERROR(worker->trainer_->LoadWeights(options.weights));
  }
  // The servers hold every parameter that learns (lr_mult != 0). Parameters
  // with lr_mult 0 (BatchNorm statistics, frozen layers) stay local.
  Net& net = worker->trainer_->net();
  std::vector<PsParam> params;
  const auto& learnable = net.learnable_params();
  worker->push_after_layer_.assign(net.layers().size(), {});
  for (const auto& p : learnable) {
    if (p.lr_mult == 0.f) {
      worker->ps_param_of_learnable_.push_back(-1);
      continue;
    }
    const int id = static_cast<int>(params.size());
    worker->ps_param_of_learnable_.push_back(id);
    worker->push_after_layer_[p.layer_index].push_back(id);
    params.push_back({p.name, p.blob, p.lr_mult, p.decay_mult});
  }
  if (options.engine == Engine::kGpu) {
    std::vector<Blob*> blobs;
    for (const PsParam& p : params) blobs.push_back(p.blob);
    PSTRAIN_ASSIGN_OR_RETURN(worker->device_gradients_, DeviceGradients::Create(blobs));
  }
  PSTRAIN_ASSIGN_OR_RETURN(worker->client_,
                           PsClient::Connect(context, options.client, std::move(params)));
  return worker;
}

void PsWorker::Emit(TrainEvent event) const {
  if (options_.on_event) options_.on_event(event);
}

Status PsWorker::WriteSnapshot(int64_t iter, const std::vector<std::string>& shard_files) {
  const caffe::SolverParameter& solver = trainer_->solver();
  const std::string base = solver.snapshot_prefix() + "_iter_" + std::to_string(iter);
  const std::filesystem::path parent = std::filesystem::path(base).parent_path();
  std::error_code ec;
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  const std::string model = base + ".caffemodel";
  PSTRAIN_RETURN_IF_ERROR(trainer_->net().WriteCaffemodel(model));
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
  manifest.set_workers(options_.client.world_size);
  PSTRAIN_RETURN_IF_ERROR(WriteTextProto(manifest, base + ".manifest"));
  Emit({"snapshot", static_cast<int>(iter), {}, model});
  return Status::Ok();
}

Status PsWorker::Run() {
  const caffe::SolverParameter& solver = trainer_->solver();
  Net& net = trainer_->net();
  const int rank = options_.client.rank;
  const int iter_size = std::max(1, solver.iter_size());
  const bool clip_at_end =
      solver.clip_gradients() >= 0 && options_.client.mode != ConsistencyMode::kBsp;

  int64_t clock = 0;
  PSTRAIN_RETURN_IF_ERROR(client_->Hello(&clock));
  if (rank == 0 && clock == 0) PSTRAIN_RETURN_IF_ERROR(client_->InitPush());
  // Continue the data stream where this worker's clock says it stopped.
  for (const auto& layer : net.layers()) {
    if (auto* data = dynamic_cast<DataLayer*>(layer.get())) data->SeekToBatch(clock * iter_size);
  }
  Rng straggle_rng(MixSeed(static_cast<uint64_t>(solver.random_seed()), 1000 + rank));
  // Images per iteration: the first top of the first data layer.
  int batch = 0;
  for (size_t i = 0; i < net.layers().size() && batch == 0; ++i) {
    const std::string type = net.layers()[i]->type();
    if ((type == "Data" || type == "DummyData" || type == "Input") && !net.top_vecs()[i].empty()) {
      batch = net.top_vecs()[i][0]->shape(0);
    }
  }

  const int64_t max_iter = solver.max_iter();
  // bsp: the next pull goes out before the last backward, so that the weights
  // of the layers pushed first travel while backward still runs.
  // GPU workers keep the pull after the pushes: pulled weights land in host
  // memory while backward still runs on the device.
  const bool early_pull = options_.client.mode == ConsistencyMode::kBsp && !device_gradients_;
  PSTRAIN_RETURN_IF_ERROR(client_->Pull(clock));
  double loss_sum = 0;  // since the last display
  int loss_count = 0;
  auto display_start = Clock::now();
  int64_t display_clock = clock;
  PsTraffic display_traffic = client_->traffic();
  while (clock < max_iter) {
    int64_t version = 0;
    std::vector<std::string> shard_files;
    PSTRAIN_RETURN_IF_ERROR(client_->WaitPull(&version, &shard_files));
    if (rank == 0 && !shard_files.empty() && clock > 0) {
      PSTRAIN_RETURN_IF_ERROR(WriteSnapshot(clock, shard_files));
    }
    if (rank == 0 && solver.test_interval() > 0 && clock % solver.test_interval() == 0 &&
        (clock > 0 || solver.test_initialization())) {
      trainer_->set_iter(static_cast<int>(clock));
      PSTRAIN_RETURN_IF_ERROR(trainer_->TestAll().status());
    }
    if (options_.straggle_ms > 0 || options_.straggle_jitter_ms > 0) {
      int delay = options_.straggle_ms;
      if (options_.straggle_jitter_ms > 0) {
        delay += static_cast<int>(straggle_rng.Below(options_.straggle_jitter_ms + 1));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(delay));
    }

    net.ClearParamDiffs();
    float loss = 0.f;
    Status push_status;
    for (int k = 0; k < iter_size; ++k) {
      loss += net.Forward();
      const bool last = k == iter_size - 1;
      if (last && early_pull && (clock + 1 < max_iter || rank == 0)) {
        // The shards answer chunk by chunk as each chunk's step is applied,
        // which needs this worker's push of it: the weights backward still
        // reads are never overwritten.
        PSTRAIN_RETURN_IF_ERROR(client_->Pull(clock + 1));
      }
      if (last && !clip_at_end && device_gradients_) {
        // Copy each layer's gradients out on the side stream; push the ones
        // whose copies are done as backward goes on, then the rest.
        const DeviceGradients::PushFn push = [&](const std::vector<int>& ids,
                                                 const std::vector<const float*>& diffs) {
          return client_->Push(ids, clock, -1.0, diffs);
        };
        net.Backward([&](int layer) {
          if (push_status.ok() && !push_after_layer_[layer].empty()) {
            device_gradients_->Start(push_after_layer_[layer]);
            push_status = device_gradients_->Drain(/*wait=*/false, push);
          }
        });
        if (push_status.ok()) push_status = device_gradients_->Drain(/*wait=*/true, push);
      } else if (last && !clip_at_end) {
        net.Backward([&](int layer) {
          if (push_status.ok() && !push_after_layer_[layer].empty()) {
            push_status = client_->Push(push_after_layer_[layer], clock, -1.0);
          }
        });
      } else {
        net.Backward();
      }
      PSTRAIN_RETURN_IF_ERROR(net.RuntimeStatus());
    }
    PSTRAIN_RETURN_IF_ERROR(push_status);
    if (clip_at_end) {
      std::vector<int> all;
      double sum = 0;
      for (size_t i = 0; i < ps_param_of_learnable_.size(); ++i) {
        if (ps_param_of_learnable_[i] < 0) continue;
        all.push_back(ps_param_of_learnable_[i]);
        sum += net.learnable_params()[i].blob->SumSquaresDiff();
      }
      PSTRAIN_RETURN_IF_ERROR(client_->Push(all, clock, sum));
    }
    loss /= static_cast<float>(iter_size);
    if (!std::isfinite(loss)) {
      return Status::Error("training diverged: the loss is " + std::to_string(loss) +
                           " at iteration " + std::to_string(clock) + " on worker " +
                           std::to_string(rank));
    }
    loss_sum += loss;
    ++loss_count;
    ++clock;
    if (solver.display() > 0 && clock % solver.display() == 0) {
      const auto now = Clock::now();
      const double seconds = std::chrono::duration<double>(now - display_start).count();
      const PsTraffic& t = client_->traffic();
      const double iters = static_cast<double>(clock - display_clock);
      TrainEvent event{"train", static_cast<int>(clock), {}, ""};
      event.values = {{"loss", loss_sum / std::max(1, loss_count)},
                      {"images_per_second", seconds > 0 ? iters * batch * iter_size / seconds : 0},
                      {"pull_wait_seconds", t.pull_wait_seconds - display_traffic.pull_wait_seconds},
                      {"bytes_sent", static_cast<double>(t.bytes_sent - display_traffic.bytes_sent)},
                      {"bytes_received",
                       static_cast<double>(t.bytes_received - display_traffic.bytes_received)},
                      {"staleness", static_cast<double>(clock - 1 - version)}};
      Emit(event);
      display_start = now;
      display_clock = clock;
      display_traffic = t;
      loss_sum = 0;
      loss_count = 0;
    }
    if (!early_pull && (clock < max_iter || rank == 0)) {
      PSTRAIN_RETURN_IF_ERROR(client_->Pull(clock));
    }
  }
  PSTRAIN_RETURN_IF_ERROR(client_->Flush());
  if (rank != 0) return Status::Ok();

  // Worker 0: the final weights are a barrier at max_iter (every worker done).
  int64_t version = 0;
  std::vector<std::string> shard_files;
  PSTRAIN_RETURN_IF_ERROR(client_->WaitPull(&version, &shard_files));
  if (solver.test_interval() > 0 && clock % solver.test_interval() == 0) {
    trainer_->set_iter(static_cast<int>(clock));
    PSTRAIN_RETURN_IF_ERROR(trainer_->TestAll().status());
  }
  if (solver.snapshot_after_train() || !shard_files.empty()) {
    PSTRAIN_RETURN_IF_ERROR(WriteSnapshot(clock, shard_files));
  }
  auto stats = client_->Stats();
  if (stats.ok()) {
    TrainEvent event{"server_stats", static_cast<int>(clock), {}, ""};
    int64_t staleness_max = 0, bad = 0;
    for (const auto& s : stats.value()) {
      staleness_max = std::max(staleness_max, s.staleness_max());
      bad += s.bad_messages();
    }
    event.values = {{"version", static_cast<double>(version)},
                    {"staleness_max", static_cast<double>(staleness_max)},
                    {"bad_messages", static_cast<double>(bad)}};
    Emit(event);
  }
  PSTRAIN_RETURN_IF_ERROR(client_->Shutdown());
  Emit({"done", static_cast<int>(clock), {{"version", static_cast<double>(version)}}, ""});
  return Status::Ok();
}

}  // namespace pstrain
