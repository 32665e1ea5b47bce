#include "worker/trainer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <random>

#include "common/device.hpp"
#include "common/optim/lr_policy.hpp"
#include "common/optim/solver_proto.hpp"
#include "common/out_of_memory.hpp"
#include "common/proto_io.hpp"
#include "worker/caffe_hdf5.hpp"
#include "worker/net_check.hpp"

namespace pstrain {
namespace {

// Caffe's test_state/train_state merged over the phase we force.
caffe::NetState StateFor(caffe::Phase phase, const caffe::NetState* extra) {
  caffe::NetState state;
  if (extra != nullptr) state = *extra;
  state.set_phase(phase);
  return state;
}

bool IsMemoryDataLayer(const Net& net, const std::string& name) {
  const Layer* layer = net.layer_by_name(name);
  return layer != nullptr && std::string(layer->type()) == "MemoryData";
}

}  // namespace

Result<std::unique_ptr<Trainer>> Trainer::FromFile(const std::string& solver_path,
                                                   const TrainerOptions& options) {
  caffe::SolverParameter solver;
  std::map<std::string, int> lines;
  PSTRAIN_RETURN_IF_ERROR(ReadTextProtoWithFieldLines(solver_path, &solver, &lines));
  return Create(solver, solver_path, options, lines);
}

Result<std::unique_ptr<Trainer>> Trainer::Create(const caffe::SolverParameter& solver,
                                                 const std::string& solver_path,
                                                 const TrainerOptions& options,
                                                 const std::map<std::string, int>& field_lines) {
  std::unique_ptr<Trainer> trainer(new Trainer());
  trainer->solver_lines_ = field_lines;
  PSTRAIN_RETURN_IF_ERROR(
      CatchOutOfMemory([&] { return trainer->Init(solver, solver_path, options); }));
  return trainer;
}

std::string Trainer::ResolveNetPath(const std::string& path) const {
  if (path.empty() || path[0] == '/' || FileExists(path)) return path;
  std::filesystem::path beside = std::filesystem::path(solver_path_).parent_path() / path;
  return FileExists(beside.string()) ? beside.string() : path;
}

Result<std::unique_ptr<Net>> Trainer::NetFromFile(const std::string& path,
                                                  const NetOptions& options) {
  if (!options_.without_data) return Net::FromFile(path, options);
  PSTRAIN_ASSIGN_OR_RETURN(NetWithoutData net, ReadNetWithoutData(path, options.state));
  NetOptions with_lines = options;
  with_lines.source = path;
  with_lines.layer_lines = net.layer_lines;
  return Net::Create(net.param, with_lines);
}

Result<std::unique_ptr<Net>> Trainer::NetFromParam(const caffe::NetParameter& param,
                                                   const NetOptions& options) {
  if (!options_.without_data) return Net::Create(param, options);
  PSTRAIN_ASSIGN_OR_RETURN(NetWithoutData net,
                           NetParamWithoutData(param, options.source, options.state));
  return Net::Create(net.param, options);
}

std::string Trainer::SolverPlace(const std::string& field) const {
  auto it = solver_lines_.find(field);
  return it == solver_lines_.end() ? solver_path_ : solver_path_ + ":" + std::to_string(it->second);
}

Status Trainer::ApplySolverMode() {
  const bool wants_gpu =
      solver_.has_solver_mode() && solver_.solver_mode() == caffe::SolverParameter::GPU;
  if (!wants_gpu || options_.engine == Engine::kGpu) return Status::Ok();
  if (!BuiltWithCuda()) {
    return Status::InvalidArgument(
        SolverPlace("solver_mode") +
        ": solver_mode: GPU, but this build has no CUDA (use solver_mode: CPU or drop it)");
  }
  const int device = solver_.device_id();
  PSTRAIN_RETURN_IF_ERROR(UseCudaDevice(
      device, SolverPlace("solver_mode") + ": solver_mode: GPU, device_id " + std::to_string(device)));
  options_.engine = Engine::kGpu;
  return Status::Ok();
}

Status Trainer::Init(const caffe::SolverParameter& solver, const std::string& solver_path,
                     const TrainerOptions& options) {
  solver_ = solver;
  solver_path_ = solver_path;
  options_ = options;
  auto hyper = optim::SolverHyperFromProto(solver_);
  if (!hyper.ok()) return hyper.status().WithContext(solver_path);
  hyper_ = hyper.value();
  PSTRAIN_ASSIGN_OR_RETURN(rule_, optim::MakeUpdateRule(hyper_));
  smoothed_loss_ = SmoothedLoss(solver_.average_loss());

  if (!options_.without_data && options_.apply_solver_mode) {
    PSTRAIN_RETURN_IF_ERROR(ApplySolverMode());
  }
  if (options_.engine == Engine::kGpu) {
    // The updates will run on the device: a rule without a GPU kernel is
    // refused here, before the first step.
    PSTRAIN_RETURN_IF_ERROR(DeviceUpdate::Supports(hyper_).WithContext(SolverPlace("type")));
  }
  NetContext context = options.context;
  context.engine = options_.engine;
  caffe::SolverState resume_state;
  if (!options.resume_from.empty()) {
    PSTRAIN_RETURN_IF_ERROR(ReadSolverStateFile(options.resume_from, &resume_state));
    context.start_iter = static_cast<int64_t>(resume_state.iter()) * hyper_.iter_size;
  }
  context.seed = solver_.random_seed() >= 0 ? static_cast<uint64_t>(solver_.random_seed())
                                            : std::random_device()();

  // The train net: exactly one of train_net_param, train_net, net_param, net.
  const int sources = solver_.has_train_net_param() + solver_.has_train_net() +
                      solver_.has_net_param() + solver_.has_net();
  if (sources != 1) {
    return Status::InvalidArgument(solver_path +
                                   ": give exactly one of net, net_param, train_net, "
                                   "train_net_param (found " +
                                   std::to_string(sources) + ")");
  }
  NetOptions train_options;
  train_options.context = context;
  train_options.autotune = options.autotune;
  train_options.state = StateFor(caffe::TRAIN, solver_.has_train_state() ? &solver_.train_state()
                                                                         : nullptr);
  if (solver_.has_train_net_param() || solver_.has_net_param()) {
    train_options.source = solver_path + " (inline net)";
    const auto& p = solver_.has_train_net_param() ? solver_.train_net_param() : solver_.net_param();
    PSTRAIN_ASSIGN_OR_RETURN(net_, NetFromParam(p, train_options));
  } else {
    const std::string path = ResolveNetPath(solver_.has_train_net() ? solver_.train_net()
                                                                    : solver_.net());
    PSTRAIN_ASSIGN_OR_RETURN(net_, NetFromFile(path, train_options));
  }
  if (solver_.snapshot_format() == caffe::SolverParameter::HDF5) {
    // Caffe's HDF5 model names a group by the layer (UnwritableHdf5LayerName):
    // said now, not at the first snapshot.
    std::vector<std::string> names;
    for (const auto& layer : net_->layers()) names.push_back(layer->name());
    if (const auto bad = UnwritableHdf5LayerName(names)) {
      return Status::InvalidArgument(SolverPlace("snapshot_format") +
                                     ": snapshot_format HDF5 cannot write layer '" + bad->first +
                                     "' (" + bad->second + "); use BINARYPROTO");
    }
  }

  // Test nets: explicit test_net_param / test_net first, then the generic net
  // in TEST phase for the remaining test_iter entries.
  const int explicit_tests = solver_.test_net_param_size() + solver_.test_net_size();
  const bool generic = solver_.has_net() || solver_.has_net_param();
  const int num_tests = generic ? solver_.test_iter_size() : explicit_tests;
  if (solver_.test_iter_size() != num_tests) {
    return Status::InvalidArgument(solver_path + ": test_iter must be given once per test net (" +
                                   std::to_string(num_tests) + " test nets, " +
                                   std::to_string(solver_.test_iter_size()) + " test_iter values)");
  }
  if (num_tests > 0 && solver_.test_interval() <= 0 && solver_.test_interval() != 0) {
    return Status::InvalidArgument(solver_path + ": test_interval must be >= 0");
  }
  if (solver_.test_state_size() != 0 && solver_.test_state_size() != num_tests) {
    return Status::InvalidArgument(solver_path +
                                   ": test_state must be given once per test net or not at all");
  }
  context.rank = 0;
  context.world_size = 1;
  context.start_iter = 0;
  for (int i = 0; i < num_tests; ++i) {
    NetOptions test_options;
    test_options.context = context;
    test_options.autotune = options.autotune;
    test_options.state =
        StateFor(caffe::TEST, solver_.test_state_size() ? &solver_.test_state(i) : nullptr);
    std::unique_ptr<Net> test_net;
    if (i < solver_.test_net_param_size()) {
      test_options.source = solver_path + " (inline test net)";
      PSTRAIN_ASSIGN_OR_RETURN(test_net, NetFromParam(solver_.test_net_param(i), test_options));
    } else if (i < explicit_tests) {
      const std::string path = ResolveNetPath(solver_.test_net(i - solver_.test_net_param_size()));
      PSTRAIN_ASSIGN_OR_RETURN(test_net, NetFromFile(path, test_options));
    } else if (solver_.has_net_param()) {
      test_options.source = solver_path + " (inline net)";
      PSTRAIN_ASSIGN_OR_RETURN(test_net, NetFromParam(solver_.net_param(), test_options));
    } else {
      PSTRAIN_ASSIGN_OR_RETURN(test_net, NetFromFile(ResolveNetPath(solver_.net()), test_options));
    }
    PSTRAIN_RETURN_IF_ERROR(test_net->ShareTrainedLayersWith(*net_));
    test_nets_.push_back(std::move(test_net));
  }
  // Every --memory-data names a MemoryData layer of one of the nets.
  for (const MemoryDataFiles& files : context.memory_data_files) {
    bool found = IsMemoryDataLayer(*net_, files.layer);
    for (const auto& test_net : test_nets_) {
      found = found || IsMemoryDataLayer(*test_net, files.layer);
    }
    if (!found) {
      return Status::InvalidArgument("--memory-data " + files.layer + "=" + files.data + "," +
                                     files.labels + ": " + solver_path +
                                     "'s nets have no MemoryData layer '" + files.layer + "'");
    }
  }

  const auto& params = net_->learnable_params();
  history_.assign(rule_->history_slots(), {});
  for (auto& slot : history_) {
    for (const auto& p : params) slot.emplace_back(p.blob->count(), 0.f);
  }
  if (!options.resume_from.empty()) return Restore(resume_state, options.resume_from);
  if (!options.load_weights) return Status::Ok();
  if (!options.weights.empty()) return LoadWeights(options.weights);
  for (const std::string& list : solver_.weights()) {
    PSTRAIN_RETURN_IF_ERROR(LoadWeights(list).WithContext(SolverPlace("weights") + ": weights"));
  }
  return Status::Ok();
}

Status Trainer::LoadWeights(const std::string& caffemodels) {
  size_t begin = 0;
  while (begin <= caffemodels.size()) {
    size_t end = caffemodels.find(',', begin);
    if (end == std::string::npos) end = caffemodels.size();
    std::string path = caffemodels.substr(begin, end - begin);
    const size_t first = path.find_first_not_of(" \t");
    path = first == std::string::npos ? "" : path.substr(first, path.find_last_not_of(" \t") + 1 - first);
    if (!path.empty()) PSTRAIN_RETURN_IF_ERROR(net_->CopyTrainedLayersFromFile(ResolveNetPath(path)));
    begin = end + 1;
  }
  return Status::Ok();
}

void Trainer::Emit(TrainEvent event) const {
  if (options_.on_event) options_.on_event(event);
}

void Trainer::StartAt(int iter) {
  iter_ = iter;
  net_->SeekData(static_cast<int64_t>(iter) * hyper_.iter_size);
}

Status Trainer::Solve() {
  PSTRAIN_RETURN_IF_ERROR(Step(solver_.max_iter() - iter_));
  if (options_.engine == Engine::kGpu) {
    PSTRAIN_RETURN_IF_ERROR(FinishGpuWork("training to iteration " + std::to_string(iter_)));
  }
  for (Callback* c : callbacks_) PSTRAIN_RETURN_IF_ERROR(c->OnFinish(iter_));
  if (options_.write_snapshots && solver_.snapshot_after_train() &&
      (solver_.snapshot() == 0 || iter_ % solver_.snapshot() != 0)) {
    PSTRAIN_RETURN_IF_ERROR(Snapshot().status());
  }
  if (options_.run_tests && solver_.test_interval() > 0 && iter_ % solver_.test_interval() == 0) {
    PSTRAIN_RETURN_IF_ERROR(TestAll().status());
  }
  TrainEvent done{"done", iter_, {}, ""};
  if (solver_.display() > 0 && iter_ % solver_.display() == 0) {
    // Caffe's Solve: one more forward of the train net with the final
    // weights, only to display the loss ("Iteration N, loss = ..."), which
    // enters the smoothed loss as the next iteration's would.
    const float loss = net_->Forward();
    PSTRAIN_RETURN_IF_ERROR(net_->RuntimeStatus());
    smoothed_loss_.Add(loss);
    done.values.push_back({"loss", smoothed_loss_.value()});
  }
  for (Callback* c : callbacks_) c->OnEvent(&done);
  Emit(done);
  return Status::Ok();
}

Status Trainer::Step(int iters) {
  return CatchOutOfMemory([&] { return StepLoop(iters); });
}

Status Trainer::StepLoop(int iters) {
  const int stop = iter_ + iters;
  display_start_ = Clock::now();
  display_last_iter_ = iter_ - 1;  // the first window counts this call's first iteration
  while (iter_ < stop) {
    for (Callback* c : callbacks_) PSTRAIN_RETURN_IF_ERROR(c->OnStart(iter_));
    if (options_.run_tests && solver_.test_interval() > 0 && iter_ % solver_.test_interval() == 0 &&
        (iter_ > 0 || solver_.test_initialization()) && !test_nets_.empty()) {
      PSTRAIN_RETURN_IF_ERROR(TestAll().status());
    }
    float loss = 0.f;
    PSTRAIN_RETURN_IF_ERROR(ForwardBackward(&loss));
    if (!std::isfinite(loss)) {
      return Status::Diverged("training diverged: the loss is " + std::to_string(loss) +
                              " at iteration " + std::to_string(iter_) +
                              " (lower base_lr or check the data)");
    }
    smoothed_loss_.Add(loss);
    const float rate = optim::LearningRate(hyper_, iter_);
    if (solver_.display() > 0 && iter_ % solver_.display() == 0) Display(rate);
    for (Callback* c : callbacks_) PSTRAIN_RETURN_IF_ERROR(c->OnGradientsReady(iter_));
    const bool elsewhere = std::any_of(callbacks_.begin(), callbacks_.end(),
                                       [](const Callback* c) { return c->AppliesUpdate(); });
    if (options_.apply_updates && !elsewhere) PSTRAIN_RETURN_IF_ERROR(ApplyUpdate());
    ++iter_;
    if (options_.write_snapshots && solver_.snapshot() > 0 && iter_ % solver_.snapshot() == 0) {
      PSTRAIN_RETURN_IF_ERROR(Snapshot().status());
    }
  }
  return Status::Ok();
}

// iter_size forward/backward passes; *loss is their mean. The callbacks see
// the last pass, when the gradients become final.
Status Trainer::ForwardBackward(float* loss) {
  net_->ClearParamDiffs();
  float sum = 0.f;
  for (int i = 0; i < hyper_.iter_size; ++i) {
    sum += net_->Forward();
    const bool last = i == hyper_.iter_size - 1;
    if (last && !callbacks_.empty()) {
      for (Callback* c : callbacks_) PSTRAIN_RETURN_IF_ERROR(c->OnLastForward(iter_));
      Status hook_status;
      net_->Backward([&](int layer) {
        for (Callback* c : callbacks_) {
          if (hook_status.ok()) hook_status = c->AfterBackward(iter_, layer);
        }
      });
      PSTRAIN_RETURN_IF_ERROR(hook_status);
    } else {
      net_->Backward();
    }
    PSTRAIN_RETURN_IF_ERROR(net_->RuntimeStatus());
  }
  *loss = sum / static_cast<float>(hyper_.iter_size);
  return Status::Ok();
}

void Trainer::Display(float rate) {
  const auto now = Clock::now();
  const double seconds = std::chrono::duration<double>(now - display_start_).count();
  const double iters = iter_ - display_last_iter_;
  const double iters_per_second = seconds > 0 ? iters / seconds : 0;
  TrainEvent event{"train", iter_, {{"loss", smoothed_loss_.value()}, {"lr", rate}}, ""};
  event.values.push_back({"iters_per_second", iters_per_second});
  event.values.push_back(
      {"images_per_second", iters_per_second * net_->batch_size() * hyper_.iter_size});
  for (Callback* c : callbacks_) c->OnEvent(&event);
  Emit(event);
  display_start_ = now;
  display_last_iter_ = iter_;
}

Result<float> Trainer::ClipScaleOfDiffs() {
  if (hyper_.clip_gradients < 0) return 1.f;
  double sum = 0;
  if (device_update_) {
    PSTRAIN_ASSIGN_OR_RETURN(sum, device_update_->SumSquaresDiff());
  } else {
    for (const auto& p : net_->learnable_params()) {
      sum += optim::SumSquares(p.blob->cpu_diff(), p.blob->count());
    }
  }
  return optim::ClipScale(sum, hyper_.clip_gradients);
}

Status Trainer::ApplyUpdate() {
  const auto& params = net_->learnable_params();
  if (options_.engine == Engine::kGpu && !device_update_) {
    PSTRAIN_ASSIGN_OR_RETURN(device_update_, DeviceUpdate::Create(hyper_, params, history_));
  }
  PSTRAIN_ASSIGN_OR_RETURN(const float clip_scale, ClipScaleOfDiffs());
  const optim::StepInputs inputs{optim::LearningRate(hyper_, iter_), iter_,
                                 clip_scale / static_cast<float>(hyper_.iter_size)};
  if (device_update_) {
    device_update_->Apply(inputs);
    return Status::Ok();
  }
  std::vector<float*> history(history_.size());
  for (size_t i = 0; i < params.size(); ++i) {
    const LearnableParam& p = params[i];
    if (p.lr_mult == 0.f) continue;  // Caffe's step leaves these weights unchanged too
    for (size_t s = 0; s < history_.size(); ++s) history[s] = history_[s][i].data();
    rule_->Apply(inputs, optim::ParamHyper{p.lr_mult, p.decay_mult},
                 optim::ParamSlice{p.blob->mutable_cpu_data(), p.blob->mutable_cpu_diff(),
                                   history, static_cast<size_t>(p.blob->count())});
  }
  return Status::Ok();
}

Result<std::map<std::string, double>> Trainer::TestAll() {
  std::map<std::string, double> results;
  PSTRAIN_RETURN_IF_ERROR(CatchOutOfMemory([&] { return RunTests(&results); }));
  return results;
}

Status Trainer::RunTests(std::map<std::string, double>* out) {
  std::map<std::string, double>& results = *out;
  TrainEvent event{"test", iter_, {}, ""};
  for (size_t j = 0; j < test_nets_.size(); ++j) {
    Net& test = *test_nets_[j];
    test.SeekData(0);  // every evaluation sees the same samples
    const int iters = solver_.test_iter(static_cast<int>(j));
    const std::string prefix = test_nets_.size() > 1 ? "test" + std::to_string(j) + "/" : "";
    std::map<std::string, std::vector<double>> sums;
    double loss = 0;
    for (int it = 0; it < iters; ++it) {
      loss += test.Forward();
      PSTRAIN_RETURN_IF_ERROR(test.RuntimeStatus());
      for (const auto& name : test.output_blob_names()) {
        const Blob* blob = test.blob_by_name(name);
        auto& acc = sums[name];
        acc.resize(blob->count(), 0.0);
        for (int64_t k = 0; k < blob->count(); ++k) acc[k] += blob->cpu_data()[k];
      }
    }
    for (const auto& name : test.output_blob_names()) {
      const auto& acc = sums[name];
      for (size_t k = 0; k < acc.size(); ++k) {
        const std::string key = prefix + name + (acc.size() > 1 ? "[" + std::to_string(k) + "]" : "");
        results[key] = acc[k] / std::max(1, iters);
        event.values.push_back({key, results[key]});
      }
    }
    if (iters > 0) {
      results[prefix + "loss"] = loss / iters;
    }
  }
  Emit(event);
  return Status::Ok();
}

Result<std::string> Trainer::Snapshot() {
  std::string model;
  PSTRAIN_RETURN_IF_ERROR(CatchOutOfMemory([&] {
    Result<std::string> written = WriteSnapshot();
    if (written.ok()) model = written.value();
    return written.status();
  }));
  return model;
}

Result<std::string> Trainer::WriteSnapshot() {
  // On the GPU the weights come down through the blobs' lazy sync when the
  // .caffemodel is written; the history is downloaded here, and a kernel
  // that failed since the last wait is reported before anything is written.
  if (device_update_) PSTRAIN_RETURN_IF_ERROR(device_update_->DownloadHistory(&history_));
  const std::string base = solver_.snapshot_prefix() + "_iter_" + std::to_string(iter_);
  const std::filesystem::path parent = std::filesystem::path(base).parent_path();
  std::error_code ec;
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  if (ec) return Status::IOError(parent.string() + ": cannot create folder (" + ec.message() + ")");
  // Caffe's names: <prefix>_iter_N.caffemodel[.h5] and .solverstate[.h5].
  const std::string suffix = SnapshotSuffix(solver_);
  const std::string model = base + ".caffemodel" + suffix;
  PSTRAIN_RETURN_IF_ERROR(net_->WriteSnapshotModel(model, solver_.snapshot_diff()));
  caffe::SolverState state;
  state.set_iter(iter_);
  state.set_learned_net(model);
  int current_step = 0;
  for (int v : solver_.stepvalue()) current_step += iter_ >= v;
  state.set_current_step(current_step);
  const auto& params = net_->learnable_params();
  for (const auto& slot : history_) {
    for (size_t i = 0; i < params.size(); ++i) {
      caffe::BlobProto* blob = state.add_history();
      for (int d : params[i].blob->shape()) blob->mutable_shape()->add_dim(d);
      blob->mutable_data()->Add(slot[i].begin(), slot[i].end());
    }
  }
  PSTRAIN_RETURN_IF_ERROR(WriteSolverStateFile(state, base + ".solverstate" + suffix));
  Emit({"snapshot", iter_, {}, model});
  return model;
}

Status Trainer::RestoreFromFile(const std::string& solverstate) {
  caffe::SolverState state;
  PSTRAIN_RETURN_IF_ERROR(ReadSolverStateFile(solverstate, &state));
  PSTRAIN_RETURN_IF_ERROR(Restore(state, solverstate));
  device_update_.reset();  // the device history is rebuilt from the restored one
  StartAt(iter_);
  return Status::Ok();
}

float Trainer::learning_rate() const { return optim::LearningRate(hyper_, iter_); }

Status Trainer::set_base_lr(float base_lr) {
  solver_.set_base_lr(base_lr);
  hyper_.base_lr = base_lr;
  if (!device_update_) return Status::Ok();
  // The device update holds the hyper-parameters it was made with: it is
  // made again, from its history, at the next update.
  PSTRAIN_RETURN_IF_ERROR(device_update_->DownloadHistory(&history_));
  device_update_.reset();
  return Status::Ok();
}

Status Trainer::Restore(const caffe::SolverState& state, const std::string& solverstate) {
  const auto& params = net_->learnable_params();
  const size_t expected = history_.size() * params.size();
  if (static_cast<size_t>(state.history_size()) != expected) {
    return Status::InvalidArgument(solverstate + ": holds " + std::to_string(state.history_size()) +
                                   " history blobs, the " + rule_->type() +
                                   " solver on this net needs " + std::to_string(expected));
  }
  for (size_t s = 0; s < history_.size(); ++s) {
    for (size_t i = 0; i < params.size(); ++i) {
      const auto& blob = state.history(static_cast<int>(s * params.size() + i));
      if (blob.data_size() != params[i].blob->count()) {
        return Status::InvalidArgument(solverstate + ": history blob for '" + params[i].name +
                                       "' has " + std::to_string(blob.data_size()) +
                                       " values, the net needs " +
                                       std::to_string(params[i].blob->count()));
      }
    }
  }
  if (state.has_learned_net() && !state.learned_net().empty()) {
    std::string model = state.learned_net();
    if (!FileExists(model)) {  // the snapshot folder may have moved
      auto beside = std::filesystem::path(solverstate).parent_path() /
                    std::filesystem::path(model).filename();
      model = beside.string();
    }
    PSTRAIN_RETURN_IF_ERROR(net_->CopyTrainedLayersFromFile(model));
  }
  for (size_t s = 0; s < history_.size(); ++s) {
    for (size_t i = 0; i < params.size(); ++i) {
      const auto& blob = state.history(static_cast<int>(s * params.size() + i));
      std::copy(blob.data().begin(), blob.data().end(), history_[s][i].begin());
    }
  }
  iter_ = state.iter();
  return Status::Ok();
}

}  // namespace pstrain
