#include "worker/trainer.hpp"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <random>

#include "common/optim/lr_policy.hpp"
#include "common/optim/solver_proto.hpp"
#include "common/proto_io.hpp"
#include "worker/layers/data_layer.hpp"

namespace pstrain {
namespace {

// Caffe's test_state/train_state merged over the phase we force.
caffe::NetState StateFor(caffe::Phase phase, const caffe::NetState* extra) {
  caffe::NetState state;
  if (extra != nullptr) state = *extra;
  state.set_phase(phase);
  return state;
}

// Data layers restart from their first record at every evaluation, so each
// test pass sees the same samples.
void RewindDataLayers(Net& net);

}  // namespace

Result<std::unique_ptr<Trainer>> Trainer::FromFile(const std::string& solver_path,
                                                   const TrainerOptions& options) {
  caffe::SolverParameter solver;
  PSTRAIN_RETURN_IF_ERROR(ReadTextProto(solver_path, &solver));
  return Create(solver, solver_path, options);
}

Result<std::unique_ptr<Trainer>> Trainer::Create(const caffe::SolverParameter& solver,
                                                 const std::string& solver_path,
                                                 const TrainerOptions& options) {
  std::unique_ptr<Trainer> trainer(new Trainer());
  PSTRAIN_RETURN_IF_ERROR(trainer->Init(solver, solver_path, options));
  return trainer;
}

std::string Trainer::ResolveNetPath(const std::string& path) const {
  if (path.empty() || path[0] == '/' || FileExists(path)) return path;
  std::filesystem::path beside = std::filesystem::path(solver_path_).parent_path() / path;
  return FileExists(beside.string()) ? beside.string() : path;
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
  if (solver_.snapshot_format() == caffe::SolverParameter::HDF5) {
    return Status::Error(solver_path + ": snapshot_format HDF5 is not supported; use BINARYPROTO");
  }

  NetContext context = options.context;
  context.engine = options.engine;
  caffe::SolverState resume_state;
  if (!options.resume_from.empty()) {
    PSTRAIN_RETURN_IF_ERROR(ReadBinaryProto(options.resume_from, &resume_state));
    context.start_iter = static_cast<int64_t>(resume_state.iter()) * hyper_.iter_size;
  }
  context.seed = solver_.random_seed() >= 0 ? static_cast<uint64_t>(solver_.random_seed())
                                            : std::random_device()();

  // The train net: exactly one of train_net_param, train_net, net_param, net.
  const int sources = solver_.has_train_net_param() + solver_.has_train_net() +
                      solver_.has_net_param() + solver_.has_net();
  if (sources != 1) {
    return Status::Error(solver_path + ": give exactly one of net, net_param, train_net, "
                                       "train_net_param (found " +
                         std::to_string(sources) + ")");
  }
  NetOptions train_options;
  train_options.context = context;
  train_options.state = StateFor(caffe::TRAIN, solver_.has_train_state() ? &solver_.train_state()
                                                                         : nullptr);
  if (solver_.has_train_net_param() || solver_.has_net_param()) {
    train_options.source = solver_path + " (inline net)";
    const auto& p = solver_.has_train_net_param() ? solver_.train_net_param() : solver_.net_param();
    PSTRAIN_ASSIGN_OR_RETURN(net_, Net::Create(p, train_options));
  } else {
    const std::string path = ResolveNetPath(solver_.has_train_net() ? solver_.train_net()
                                                                    : solver_.net());
    PSTRAIN_ASSIGN_OR_RETURN(net_, Net::FromFile(path, train_options));
  }

  // Test nets: explicit test_net_param / test_net first, then the generic net
  // in TEST phase for the remaining test_iter entries.
  const int explicit_tests = solver_.test_net_param_size() + solver_.test_net_size();
  const bool generic = solver_.has_net() || solver_.has_net_param();
  const int num_tests = generic ? solver_.test_iter_size() : explicit_tests;
  if (solver_.test_iter_size() != num_tests) {
    return Status::Error(solver_path + ": test_iter must be given once per test net (" +
                         std::to_string(num_tests) + " test nets, " +
                         std::to_string(solver_.test_iter_size()) + " test_iter values)");
  }
  if (num_tests > 0 && solver_.test_interval() <= 0 && solver_.test_interval() != 0) {
    return Status::Error(solver_path + ": test_interval must be >= 0");
  }
  if (solver_.test_state_size() != 0 && solver_.test_state_size() != num_tests) {
    return Status::Error(solver_path + ": test_state must be given once per test net or not at all");
  }
  context.rank = 0;
  context.world_size = 1;
  context.start_iter = 0;
  for (int i = 0; i < num_tests; ++i) {
    NetOptions test_options;
    test_options.context = context;
    test_options.state =
        StateFor(caffe::TEST, solver_.test_state_size() ? &solver_.test_state(i) : nullptr);
    std::unique_ptr<Net> test_net;
    if (i < solver_.test_net_param_size()) {
      test_options.source = solver_path + " (inline test net)";
      PSTRAIN_ASSIGN_OR_RETURN(test_net, Net::Create(solver_.test_net_param(i), test_options));
    } else if (i < explicit_tests) {
      const std::string path = ResolveNetPath(solver_.test_net(i - solver_.test_net_param_size()));
      PSTRAIN_ASSIGN_OR_RETURN(test_net, Net::FromFile(path, test_options));
    } else if (solver_.has_net_param()) {
      test_options.source = solver_path + " (inline net)";
      PSTRAIN_ASSIGN_OR_RETURN(test_net, Net::Create(solver_.net_param(), test_options));
    } else {
      PSTRAIN_ASSIGN_OR_RETURN(test_net, Net::FromFile(ResolveNetPath(solver_.net()), test_options));
    }
    PSTRAIN_RETURN_IF_ERROR(test_net->ShareTrainedLayersWith(*net_));
    test_nets_.push_back(std::move(test_net));
  }

  const auto& params = net_->learnable_params();
  history_.assign(rule_->history_slots(), {});
  for (auto& slot : history_) {
    for (const auto& p : params) slot.emplace_back(p.blob->count(), 0.f);
  }
  if (!options.resume_from.empty()) return Restore(resume_state, options.resume_from);
  return Status::Ok();
}

Status Trainer::LoadWeights(const std::string& caffemodel) {
  return net_->CopyTrainedLayersFromFile(caffemodel);
}

void Trainer::Emit(TrainEvent event) const {
  if (options_.on_event) options_.on_event(event);
}

Status Trainer::Solve() {
  PSTRAIN_RETURN_IF_ERROR(Step(solver_.max_iter() - iter_));
  if (solver_.snapshot_after_train() &&
      (solver_.snapshot() == 0 || iter_ % solver_.snapshot() != 0)) {
    PSTRAIN_RETURN_IF_ERROR(Snapshot().status());
  }
  if (solver_.test_interval() > 0 && iter_ % solver_.test_interval() == 0) {
    PSTRAIN_RETURN_IF_ERROR(TestAll().status());
  }
  Emit({"done", iter_, {{"loss", smoothed_loss_}}, ""});
  return Status::Ok();
}

Status Trainer::Step(int iters) {
  const int stop = iter_ + iters;
  const int average = std::max(1, solver_.average_loss());
  auto last_display = std::chrono::steady_clock::now();
  int last_display_iter = iter_;
  while (iter_ < stop) {
    if (solver_.test_interval() > 0 && iter_ % solver_.test_interval() == 0 &&
        (iter_ > 0 || solver_.test_initialization()) && !test_nets_.empty()) {
      PSTRAIN_RETURN_IF_ERROR(TestAll().status());
    }
    net_->ClearParamDiffs();
    float loss = 0.f;
    for (int i = 0; i < hyper_.iter_size; ++i) {
      loss += net_->ForwardBackward();
      PSTRAIN_RETURN_IF_ERROR(net_->RuntimeStatus());
    }
    loss /= static_cast<float>(hyper_.iter_size);
    if (!std::isfinite(loss)) {
      return Status::Error("training diverged: the loss is " + std::to_string(loss) +
                           " at iteration " + std::to_string(iter_) +
                           " (lower base_lr or check the data)");
    }
    if (static_cast<int>(recent_losses_.size()) < average) {
      recent_losses_.push_back(loss);
      smoothed_loss_ = (smoothed_loss_ * (recent_losses_.size() - 1) + loss) /
                       static_cast<double>(recent_losses_.size());
    } else {
      const int idx = iter_ % average;
      smoothed_loss_ += (loss - recent_losses_[idx]) / average;
      recent_losses_[idx] = loss;
    }
    const float rate = optim::LearningRate(hyper_, iter_);
    if (solver_.display() > 0 && iter_ % solver_.display() == 0) {
      const auto now = std::chrono::steady_clock::now();
      const double seconds = std::chrono::duration<double>(now - last_display).count();
      TrainEvent event{"train", iter_, {{"loss", smoothed_loss_}, {"lr", rate}}, ""};
      if (iter_ > last_display_iter && seconds > 0) {
        event.values.push_back({"iters_per_second", (iter_ - last_display_iter) / seconds});
      }
      Emit(event);
      last_display = now;
      last_display_iter = iter_;
    }
    PSTRAIN_RETURN_IF_ERROR(ApplyUpdate());
    ++iter_;
    if (solver_.snapshot() > 0 && iter_ % solver_.snapshot() == 0) {
      PSTRAIN_RETURN_IF_ERROR(Snapshot().status());
    }
  }
  return Status::Ok();
}

Status Trainer::ApplyUpdate() {
  const auto& params = net_->learnable_params();
  float clip_scale = 1.f;
  if (hyper_.clip_gradients >= 0) {
    double sum = 0;
    for (const auto& p : params) sum += optim::SumSquares(p.blob->cpu_diff(), p.blob->count());
    clip_scale = optim::ClipScale(sum, hyper_.clip_gradients);
  }
  const optim::StepInputs inputs{optim::LearningRate(hyper_, iter_), iter_,
                                 clip_scale / static_cast<float>(hyper_.iter_size)};
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
  TrainEvent event{"test", iter_, {}, ""};
  for (size_t j = 0; j < test_nets_.size(); ++j) {
    Net& test = *test_nets_[j];
    RewindDataLayers(test);
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
  return results;
}

Result<std::string> Trainer::Snapshot() {
  const std::string base = solver_.snapshot_prefix() + "_iter_" + std::to_string(iter_);
  const std::filesystem::path parent = std::filesystem::path(base).parent_path();
  std::error_code ec;
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  if (ec) return Status::Error(parent.string() + ": cannot create folder (" + ec.message() + ")");
  const std::string model = base + ".caffemodel";
  PSTRAIN_RETURN_IF_ERROR(net_->WriteCaffemodel(model));
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
  PSTRAIN_RETURN_IF_ERROR(WriteBinaryProto(state, base + ".solverstate"));
  Emit({"snapshot", iter_, {}, model});
  return model;
}

Status Trainer::Restore(const caffe::SolverState& state, const std::string& solverstate) {  const auto& params = net_->learnable_params();
  const size_t expected = history_.size() * params.size();
  if (static_cast<size_t>(state.history_size()) != expected) {
    return Status::Error(solverstate + ": holds " + std::to_string(state.history_size()) +
                         " history blobs, the " + rule_->type() + " solver on this net needs " +
                         std::to_string(expected));
  }
  for (size_t s = 0; s < history_.size(); ++s) {
    for (size_t i = 0; i < params.size(); ++i) {
      const auto& blob = state.history(static_cast<int>(s * params.size() + i));
      if (blob.data_size() != params[i].blob->count()) {
        return Status::Error(solverstate + ": history blob for '" + params[i].name + "' has " +
                             std::to_string(blob.data_size()) + " values, the net needs " +
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

namespace {

void RewindDataLayers(Net& net) {
  for (const auto& layer : net.layers()) {
    if (auto* data = dynamic_cast<DataLayer*>(layer.get())) data->Rewind();
  }
}

}  // namespace

}  // namespace pstrain
