// Trainer: single-process training of a Caffe solver on the CPU, the
// equivalent of `caffe train` — builds the train net and the test nets
// (sharing the train net's weights), steps the solver with the update rules
// of common/optim, evaluates every test_interval, displays, and writes
// snapshots (.caffemodel + .solverstate) that Caffe can read and that resume
// a run exactly.
//
// Relative paths inside the solver (net, snapshot_prefix) are taken relative
// to the current directory, as Caffe does; a `net` path that does not exist
// there is also looked up next to the solver file.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/optim/solver_hyper.hpp"
#include "common/optim/update_rule.hpp"
#include "common/status.hpp"
#include "proto/caffe.pb.h"
#include "worker/net.hpp"
#include "worker/train_event.hpp"

namespace pstrain {

struct TrainerOptions {
  Engine engine = Engine::kFast;
  NetContext context;  // rank/world for data sharding (single process: 0 of 1)
  // A .solverstate to resume from (Caffe's --snapshot): iteration, history and
  // weights are restored and the data layers continue where the run stopped.
  std::string resume_from;
  std::function<void(const TrainEvent&)> on_event;  // may be empty
};

class Trainer {
 public:
  // Reads and upgrades the solver, builds the nets, and fills the weights.
  static Result<std::unique_ptr<Trainer>> FromFile(const std::string& solver_path,
                                                   const TrainerOptions& options);
  static Result<std::unique_ptr<Trainer>> Create(const caffe::SolverParameter& solver,
                                                 const std::string& solver_path,
                                                 const TrainerOptions& options);
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // Copies weights from a .caffemodel (Caffe's --weights).
  Status LoadWeights(const std::string& caffemodel);
  // Trains to max_iter, testing and snapshotting on the way (Caffe's Solve).
  Status Solve();
  // Runs `iters` solver steps (no final test or snapshot).
  Status Step(int iters);
  // Evaluates every test net; returns "<net#>/<output>" -> mean value, plus "loss".
  Result<std::map<std::string, double>> TestAll();
  // Writes <prefix>_iter_<iter>.caffemodel and .solverstate; returns the model path.
  Result<std::string> Snapshot();

  Net& net() { return *net_; }
  // The first test net, or null when the solver has none.
  const Net* test_net() const { return test_nets_.empty() ? nullptr : test_nets_[0].get(); }
  int iter() const { return iter_; }
  // Sets the iteration that events and snapshots report (a parameter-server
  // worker counts its own clock; the trainer does not step).
  void set_iter(int iter) { iter_ = iter; }
  const caffe::SolverParameter& solver() const { return solver_; }

 private:
  Trainer() = default;
  Status Init(const caffe::SolverParameter& solver, const std::string& solver_path,
              const TrainerOptions& options);
  Status ApplyUpdate();
  Status Restore(const caffe::SolverState& state, const std::string& path);
  void Emit(TrainEvent event) const;
  std::string ResolveNetPath(const std::string& path) const;

  caffe::SolverParameter solver_;
  std::string solver_path_;
  TrainerOptions options_;
  optim::SolverHyper hyper_;
  std::unique_ptr<optim::UpdateRule> rule_;
  std::unique_ptr<Net> net_;
  std::vector<std::unique_ptr<Net>> test_nets_;
  std::vector<std::vector<std::vector<float>>> history_;  // [slot][param][element]
  std::vector<float> recent_losses_;
  int iter_ = 0;
  double smoothed_loss_ = 0;
};

}  // namespace pstrain
