// Trainer: the one training loop, the equivalent of Caffe's Solver — builds
// the train net and the test nets (sharing the train net's weights), steps
// the solver with the update rules of common/optim, evaluates every
// test_interval, displays, and writes snapshots (.caffemodel + .solverstate)
// that Caffe can read and that resume a run exactly. `ps-net train` runs it as
// it is; a parameter-server worker (worker/ps/ps_worker) plugs into it as a
// Callback that pulls the weights before each forward and pushes each layer's
// gradients after its backward, with the local update turned off.
//
// One iteration (Step), in order:
//   callbacks' OnStart(iter)            the weights of iter must be in place
//   TestAll                             every test_interval (run_tests)
//   iter_size x { Forward; Backward }   diffs accumulate; before the last
//                                       backward OnLastForward(iter), during
//                                       it AfterBackward(iter, layer) per layer
//   divergence check                    a loss that is not finite: Diverged
//   display                             every `display` iterations: a "train"
//                                       event (callbacks' OnEvent add values)
//   callbacks' OnGradientsReady(iter)   every gradient of iter is in the diffs
//   ApplyUpdate                         the update rule (apply_updates, and no
//                                       callback's AppliesUpdate)
//   ++iter; snapshot                    every `snapshot` iterations (write_snapshots)
// Solve runs Step to max_iter, then callbacks' OnFinish(max_iter), the final
// snapshot and test, and the "done" event.
//
// On the GPU engine the update runs on the device (worker/device_update.hpp):
// weights, gradients and the solver history stay there between iterations,
// and only Snapshot downloads them. Running out of host or device memory
// anywhere below the public calls is their ResourceExhausted error
// (common/out_of_memory.hpp), and every wait the GPU loop does anyway (a
// snapshot, the end of Solve) reports a kernel that failed.
//
// Relative paths inside the solver (net, weights, snapshot_prefix) are taken
// relative to the current directory, as Caffe does; a `net` or `weights` path
// that does not exist there is also looked up next to the solver file.
//
// Initial weights, as Caffe's `caffe train`: the solver's `weights` fields
// (each a comma-separated list of .caffemodel files) are loaded in order after
// the nets are built, unless TrainerOptions::weights (the -weights flag)
// replaces them or resume_from is given.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/optim/solver_hyper.hpp"
#include "common/optim/update_rule.hpp"
#include "common/status.hpp"
#include "proto/caffe.pb.h"
#include "worker/device_update.hpp"
#include "worker/net.hpp"
#include "worker/net_autotune.hpp"
#include "worker/train_event.hpp"

namespace pstrain {

struct TrainerOptions {
  Engine engine = Engine::kFast;
  // Engine auto for the train and test nets (worker/net_autotune.hpp); used
  // when `engine` is kFast.
  AutotuneOptions autotune;
  NetContext context;  // rank/world for data sharding (single process: 0 of 1)
  // A .solverstate to resume from (Caffe's --snapshot): iteration, history and
  // weights are restored and the data layers continue where the run stopped.
  std::string resume_from;
  // Initial weights (Caffe's -weights): .caffemodel files, comma-separated,
  // copied into the net in order by layer name. When given they replace the
  // solver's own `weights` fields; with resume_from neither is loaded.
  std::string weights;
  // False: neither `weights` nor the solver's `weights` fields are loaded
  // (a parameter-server worker other than 0: its weights come from the servers).
  bool load_weights = true;
  // Builds the nets without their data (ps-net check): each Data layer opens
  // its source, reads the first record for its shape, and stands in as an
  // Input layer of the shape it would deliver (worker/net_check.hpp); the
  // solver's solver_mode is not applied. Solve and Step must not be called.
  bool without_data = false;
  // Honour the solver's `solver_mode: GPU` (and `device_id`) as `caffe train`
  // does. False for pycaffe's solvers (python/ext/bindings_solver.cpp): there,
  // as in Caffe's Python interface, caffe.set_mode_cpu/gpu decide and the
  // file's solver_mode is ignored.
  bool apply_solver_mode = true;
  std::function<void(const TrainEvent&)> on_event;  // may be empty
  // The local update rule changes the weights after each iteration. False
  // when a callback owns the weights (a parameter-server worker: the servers
  // apply the update and the next pull brings it).
  bool apply_updates = true;
  // The test nets run every test_interval and after the last iteration.
  bool run_tests = true;
  // .caffemodel + .solverstate every `snapshot` iterations and after training.
  bool write_snapshots = true;
};

class Trainer {
 public:
  // Hooks into the loop, in the manner of Caffe's Solver::Callback and
  // Net::add_after_backward. Every hook runs on the thread that runs the
  // loop; a hook that returns an error stops the loop with that error.
  class Callback {
   public:
    virtual ~Callback() = default;
    // At the start of iteration `iter`, before its tests and forward passes.
    // When it returns, the net must hold the weights iteration `iter` trains on.
    virtual Status OnStart(int /*iter*/) { return Status::Ok(); }
    // After the last forward pass of the iteration (the only one unless
    // iter_size > 1), before its backward.
    virtual Status OnLastForward(int /*iter*/) { return Status::Ok(); }
    // Right after layer `layer`'s backward in the iteration's last pass: the
    // gradients of the parameters owned by that layer (LearnableParam's
    // layer_index) are final. An error here stops the loop after the pass.
    virtual Status AfterBackward(int /*iter*/, int /*layer*/) { return Status::Ok(); }
    // Every gradient of the iteration is in the diffs (summed over iter_size
    // passes, not yet scaled), before the local update.
    virtual Status OnGradientsReady(int /*iter*/) { return Status::Ok(); }
    // True: the update is applied elsewhere and this callback's
    // OnGradientsReady leaves the iteration's updated weights in the net
    // (pstrain.caffe's NCCL: a parameter-server shard applies the solver's
    // rule). While such a callback is registered the trainer applies no local
    // update; the iteration still advances, displays and snapshots.
    virtual bool AppliesUpdate() const { return false; }
    // Before the trainer emits a "train" (display) or "done" event: may add
    // values to it.
    virtual void OnEvent(TrainEvent* /*event*/) {}
    // After the last iteration, before the final snapshot and test: when it
    // returns, the net must hold the final weights.
    virtual Status OnFinish(int /*iter*/) { return Status::Ok(); }
  };

  // Reads and upgrades the solver, builds the nets, and fills the weights.
  // An explicit `solver_mode: GPU` with an engine other than kGpu selects CUDA
  // device device_id (as `caffe train` without -gpu does); on a build without
  // CUDA it is an InvalidArgument error naming the solver file.
  static Result<std::unique_ptr<Trainer>> FromFile(const std::string& solver_path,
                                                   const TrainerOptions& options);
  // `field_lines`: the line of each top-level solver field in solver_path
  // (ReadTextProtoWithFieldLines), for messages naming file:line; may be empty.
  static Result<std::unique_ptr<Trainer>> Create(
      const caffe::SolverParameter& solver, const std::string& solver_path,
      const TrainerOptions& options, const std::map<std::string, int>& field_lines = {});
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // Adds a hook. REQUIRES: `callback` outlives the trainer's Solve and Step calls.
  void add_callback(Callback* callback) { callbacks_.push_back(callback); }
  // Copies weights from .caffemodel files (comma-separated, in order, as
  // Caffe's -weights), each path resolved as the solver's paths are.
  Status LoadWeights(const std::string& caffemodels);
  // Continues at iteration `iter` with the weights the net holds (a
  // parameter-server worker starts at the servers' clock): the data layers
  // deliver iteration iter's batches next. REQUIRES: iter >= 0.
  void StartAt(int iter);
  // Trains to max_iter, testing and snapshotting on the way (Caffe's Solve).
  Status Solve();
  // Runs `iters` iterations (no final test or snapshot).
  Status Step(int iters);
  // Evaluates every test net; returns "<net#>/<output>" -> mean value, plus "loss".
  Result<std::map<std::string, double>> TestAll();
  // Writes <prefix>_iter_<iter>.caffemodel and .solverstate; returns the model path.
  Result<std::string> Snapshot();
  // Caffe's Solver::Restore: iteration, history and weights from a
  // .solverstate (its learned_net), data continuing at that iteration.
  Status RestoreFromFile(const std::string& solverstate);
  // One update of the weights from the diffs as they are (Caffe's
  // ApplyUpdate, which pycaffe exposes): the iteration does not advance.
  Status ApplyUpdate();
  // The learning rate of the current iteration (Caffe's GetLearningRate).
  float learning_rate() const;
  // Changes base_lr from the next update on (pycaffe's solver.param.base_lr).
  Status set_base_lr(float base_lr);

  Net& net() { return *net_; }
  // The first test net, or null when the solver has none.
  const Net* test_net() const { return test_nets_.empty() ? nullptr : test_nets_[0].get(); }
  const std::vector<std::unique_ptr<Net>>& test_nets() const { return test_nets_; }
  int iter() const { return iter_; }
  const caffe::SolverParameter& solver() const { return solver_; }
  // The engine the nets run on: TrainerOptions::engine, or kGpu when the solver
  // says `solver_mode: GPU` (see FromFile).
  Engine engine() const { return options_.engine; }
  int iter_size() const { return hyper_.iter_size; }
  // Caffe's smoothed loss: the mean over the last average_loss iterations.
  double smoothed_loss() const { return smoothed_loss_.value(); }

 private:
  using Clock = std::chrono::steady_clock;

  Trainer() = default;
  // Caffe's rule for an explicit `solver_mode: GPU` when options_.engine is
  // not kGpu (no --gpu): selects CUDA device device_id and the GPU engine; an
  // error naming the solver file on a build without CUDA.
  Status ApplySolverMode();
  Status Init(const caffe::SolverParameter& solver, const std::string& solver_path,
              const TrainerOptions& options);
  // "<solver file>:<line of field>", or the file alone where the line is unknown.
  std::string SolverPlace(const std::string& field) const;
  Status StepLoop(int iters);
  Status RunTests(std::map<std::string, double>* results);
  Result<std::string> WriteSnapshot();
  Status ForwardBackward(float* loss);
  void Display(float rate);
  // The clip scale of the iteration's gradients (1 without clip_gradients).
  Result<float> ClipScaleOfDiffs();
  Status Restore(const caffe::SolverState& state, const std::string& path);
  void Emit(TrainEvent event) const;
  std::string ResolveNetPath(const std::string& path) const;
  // Net::FromFile, or with without_data the file read and rewritten first.
  Result<std::unique_ptr<Net>> NetFromFile(const std::string& path, const NetOptions& options);
  Result<std::unique_ptr<Net>> NetFromParam(const caffe::NetParameter& param,
                                            const NetOptions& options);

  caffe::SolverParameter solver_;
  std::string solver_path_;
  std::map<std::string, int> solver_lines_;  // top-level field -> line in solver_path_
  TrainerOptions options_;
  optim::SolverHyper hyper_;
  std::unique_ptr<optim::UpdateRule> rule_;
  std::unique_ptr<Net> net_;
  std::vector<std::unique_ptr<Net>> test_nets_;
  // [slot][param][element]; on the GPU engine current only after a
  // Snapshot (the device's copy in device_update_ is the live one).
  HostHistory history_;
  std::unique_ptr<DeviceUpdate> device_update_;  // GPU engine, from the first update
  std::vector<Callback*> callbacks_;             // not owned
  int iter_ = 0;
  SmoothedLoss smoothed_loss_{1};
  // The display window: when the last one ended and the last iteration it counted.
  Clock::time_point display_start_;
  int display_last_iter_ = 0;
};

}  // namespace pstrain
