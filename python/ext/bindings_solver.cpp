// Solvers from Python: pycaffe's Solver and its six subclasses over the
// engine's Trainer (worker/trainer.hpp), which runs the update rules of
// common/optim; get_solver picks the class by the solver file's type.
// step and solve release the GIL and give Ctrl-C its chance between
// iterations (a KeyboardInterrupt stops the loop after the iteration).
#include <google/protobuf/text_format.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdio>
#include <map>
#include <optional>

#include "common/device.hpp"
#include "common/proto_io.hpp"
#include "python/ext/bindings.hpp"
#include "worker/train_event.hpp"
#include "worker/trainer.hpp"

namespace pstrain::python {
namespace {

// pycaffe's add_callback(on_start, on_gradients_ready), and the check for
// signals (Ctrl-C) at the start of every iteration. A Python exception is
// kept and raised when the loop has stopped. `applies_update`: the callback
// leaves the updated weights in the net itself (Trainer::Callback::AppliesUpdate).
class PyCallback : public Trainer::Callback {
 public:
  PyCallback(nb::object on_start, nb::object on_gradients_ready, bool applies_update = false)
      : on_start_(std::move(on_start)),
        on_gradients_ready_(std::move(on_gradients_ready)),
        applies_update_(applies_update) {}
  ~PyCallback() override {
    if (!Py_IsInitialized()) {
      on_start_.release();
      on_gradients_ready_.release();
    }
  }

  Status OnStart(int /*iter*/) override { return Run(on_start_); }
  Status OnGradientsReady(int /*iter*/) override { return Run(on_gradients_ready_); }
  bool AppliesUpdate() const override { return applies_update_; }

  // The exception a call raised, once (then cleared).
  std::unique_ptr<nb::python_error> TakeError() { return std::move(error_); }

 protected:
  Status Run(const nb::object& fn) {
    nb::gil_scoped_acquire gil;
    try {
      if (fn.is_valid() && !fn.is_none()) fn();
      return Status::Ok();
    } catch (nb::python_error& e) {
      error_ = std::make_unique<nb::python_error>(std::move(e));
      return Status::Error("a Python callback raised");
    }
  }

 private:
  nb::object on_start_, on_gradients_ready_;
  bool applies_update_;
  std::unique_ptr<nb::python_error> error_;
};

class SignalCheck : public Trainer::Callback {
 public:
  Status OnStart(int /*iter*/) override {
    nb::gil_scoped_acquire gil;
    if (PyErr_CheckSignals() != 0) {
      error_ = std::make_unique<nb::python_error>();  // takes the pending KeyboardInterrupt
      return Status::Error("interrupted");
    }
    return Status::Ok();
  }
  std::unique_ptr<nb::python_error> TakeError() { return std::move(error_); }

 private:
  std::unique_ptr<nb::python_error> error_;
};

}  // namespace

struct SolverHandle {
  std::unique_ptr<Trainer> trainer;
  std::shared_ptr<NetState> net_state;
  std::vector<std::shared_ptr<NetState>> test_states;
  std::vector<std::unique_ptr<PyCallback>> callbacks;
  std::unique_ptr<SignalCheck> signals;
};
struct SGDSolverHandle : SolverHandle {};
struct NesterovSolverHandle : SGDSolverHandle {};
struct AdaGradSolverHandle : SGDSolverHandle {};
struct RMSPropSolverHandle : SGDSolverHandle {};
struct AdaDeltaSolverHandle : SGDSolverHandle {};
struct AdamSolverHandle : SGDSolverHandle {};

// pycaffe's solver.param: a few fields, base_lr settable.
struct SolverParamHandle {
  SolverHandle* solver = nullptr;
};

namespace {

// Builds the trainer for `path`; `type` forces the solver type ("" keeps the file's).
// One of several solvers (caffe.set_solver_count(n > 1), rank r, as Caffe's
// train.py sets them): the train net's data layers read rank r's share of
// every global batch (NetContext rank of world_size: Data, MemoryData, and
// Python layers' self.rank / self.num_workers), and, as in Caffe, only rank
// 0 (the root solver) tests, snapshots and displays.
void MakeSolver(SolverHandle* h, const std::string& path, const std::string& type) {
  caffe::SolverParameter solver;
  std::map<std::string, int> lines;  // field -> line, for messages naming file:line
  ThrowIfError(ReadTextProtoWithFieldLines(path, &solver, &lines));
  if (!type.empty()) {  // SGDSolver(file) is SGD whatever the file says, as in pycaffe
    solver.set_type(type);
    solver.clear_solver_type();
  }
  const Settings& settings = CurrentSettings();
  if (settings.seeded && solver.random_seed() < 0) {
    solver.set_random_seed(static_cast<int64_t>(settings.seed));
  }
  TrainerOptions options;
  const NetOptions net_options = NetOptionsFromSettings(caffe::TRAIN);
  options.engine = net_options.context.engine;
  options.autotune = net_options.autotune;
  options.context = net_options.context;
  // pycaffe: caffe.set_mode_cpu/gpu choose the device; the file's solver_mode
  // (which only `caffe train` reads) is ignored, so Caffe's own solvers
  // (solver_mode: GPU) run on the CPU after set_mode_cpu().
  options.apply_solver_mode = false;
  const bool several = settings.solver_count > 1;
  const bool root = !several || settings.solver_rank == 0;
  if (several) {
    if (settings.solver_rank >= settings.solver_count) {
      throw std::invalid_argument("solver rank " + std::to_string(settings.solver_rank) +
                                  " is out of range for solver_count " +
                                  std::to_string(settings.solver_count));
    }
    options.context.rank = settings.solver_rank;
    options.context.world_size = settings.solver_count;
  }
  options.run_tests = root;
  options.write_snapshots = root;
  options.on_event = [root](const TrainEvent& e) {
    // init_log(1) and up: warnings only; a solver other than the root is quiet.
    if (!root || CurrentSettings().log_level > 0) return;
    std::fprintf(stderr, "%s\n", FormatEvent(e, false).c_str());
  };
  auto trainer = Trainer::Create(solver, path, options, lines);
  ThrowIfError(trainer.status());
  h->trainer = std::move(trainer).value();
  h->net_state = NewNetState(&h->trainer->net());
  for (const auto& test : h->trainer->test_nets())
    h->test_states.push_back(NewNetState(test.get()));
  h->signals = std::make_unique<SignalCheck>();
  h->trainer->add_callback(h->signals.get());
}

void RaiseCallbackError(SolverHandle& h) {
  std::unique_ptr<nb::python_error> error = h.signals->TakeError();
  for (auto& c : h.callbacks) {
    if (error) break;
    error = c->TakeError();
  }
  if (!error) return;
  error->restore();
  throw nb::python_error();
}

// Runs `work` without the GIL; raises a callback's exception, else the status.
template <typename F>
void RunLoop(SolverHandle& h, F&& work) {
  Status status;
  {
    nb::gil_scoped_release release;
    status = work();
  }
  if (!status.ok()) RaiseCallbackError(h);
  ThrowIfError(status);
}

nb::object BorrowedNet(nb::handle solver, Net* net, const std::shared_ptr<NetState>& state) {
  nb::object handle = nb::cast(NewBorrowedNet(net, state), nb::rv_policy::take_ownership);
  nb::keep_alive_obj(handle, solver);
  return handle;
}

template <typename Handle>
void BindSolverClass(nb::module_& m, const char* name, const char* type) {
  nb::class_<Handle, SGDSolverHandle>(m, name).def(
      "__init__",
      [type](Handle* self, const std::string& path) {
        new (self) Handle();
        MakeSolver(self, path, type);
      },
      nb::arg("filename"));
}

}  // namespace

void BindSolver(nb::module_& m) {
  nb::class_<SolverParamHandle>(m, "SolverParameter")
      .def_prop_ro(
          "max_iter",
          [](const SolverParamHandle& p) { return p.solver->trainer->solver().max_iter(); })
      .def_prop_ro("display",
                   [](const SolverParamHandle& p) { return p.solver->trainer->solver().display(); })
      .def_prop_ro("layer_wise_reduce",
                   [](const SolverParamHandle& p) {
                     return p.solver->trainer->solver().layer_wise_reduce();
                   })
      .def_prop_rw(
          "base_lr",
          [](const SolverParamHandle& p) { return p.solver->trainer->solver().base_lr(); },
          [](SolverParamHandle& p, float lr) { ThrowIfError(p.solver->trainer->set_base_lr(lr)); });

  nb::class_<SolverHandle>(m, "Solver", nb::dynamic_attr())
      .def_prop_ro("net",
                   [](nb::handle self) {
                     SolverHandle& h = nb::cast<SolverHandle&>(self);
                     return BorrowedNet(self, &h.trainer->net(), h.net_state);
                   })
      .def_prop_ro("test_nets",
                   [](nb::handle self) {
                     SolverHandle& h = nb::cast<SolverHandle&>(self);
                     nb::list list;
                     const auto& nets = h.trainer->test_nets();
                     for (size_t i = 0; i < nets.size(); ++i) {
                       list.append(BorrowedNet(self, nets[i].get(), h.test_states[i]));
                     }
                     return list;
                   })
      .def_prop_ro("iter", [](const SolverHandle& h) { return h.trainer->iter(); })
      .def_prop_ro("lr", [](const SolverHandle& h) { return h.trainer->learning_rate(); })
      .def_prop_ro("type", [](const SolverHandle& h) { return h.trainer->solver().type(); })
      .def_prop_ro(
          "param", [](SolverHandle& h) { return SolverParamHandle{&h}; }, nb::keep_alive<0, 1>())
      .def(
          "step",
          [](SolverHandle& h, int iters) {
            if (iters < 0) throw std::invalid_argument("step: iterations must be >= 0");
            RunLoop(h, [&] { return h.trainer->Step(iters); });
          },
          nb::arg("iters"))
      .def(
          "solve",
          [](SolverHandle& h, const std::optional<std::string>& resume) {
            if (resume) ThrowIfError(h.trainer->RestoreFromFile(*resume));
            RunLoop(h, [&] { return h.trainer->Solve(); });
          },
          nb::arg("resume") = nb::none())
      .def("restore",
           [](SolverHandle& h, const std::string& path) {
             ThrowIfError(h.trainer->RestoreFromFile(path));
           })
      .def("snapshot",
           [](SolverHandle& h) {
             Result<std::string> model = [&] {
               nb::gil_scoped_release release;
               return h.trainer->Snapshot();
             }();
             return ValueOrThrow(std::move(model));
           })
      .def("apply_update", [](SolverHandle& h) { ThrowIfError(h.trainer->ApplyUpdate()); })
      .def("share_weights",
           [](SolverHandle& h, NetHandle& net) {
             ThrowIfError(net.net->ShareTrainedLayersWith(h.trainer->net()));
           })
      .def(
          "add_callback",
          [](SolverHandle& h, nb::object on_start, nb::object on_gradients_ready) {
            h.callbacks.push_back(
                std::make_unique<PyCallback>(std::move(on_start), std::move(on_gradients_ready)));
            h.trainer->add_callback(h.callbacks.back().get());
          },
          nb::arg("on_start"), nb::arg("on_gradients_ready"))
      .def(
          "add_callback",
          [](SolverHandle& h, nb::object callback) {
            // An object with on_start / on_gradients_ready methods (Caffe's NCCL).
            nb::object start = nb::getattr(callback, "on_start", nb::none());
            nb::object ready = nb::getattr(callback, "on_gradients_ready", nb::none());
            if (start.is_none() && ready.is_none()) {
              throw nb::type_error(
                  "add_callback takes (on_start, on_gradients_ready) or an object "
                  "with on_start / on_gradients_ready methods");
            }
            const int applies_update =
                PyObject_IsTrue(nb::getattr(callback, "applies_update", nb::none()).ptr());
            if (applies_update < 0) throw nb::python_error();
            h.callbacks.push_back(std::make_unique<PyCallback>(std::move(start), std::move(ready),
                                                               applies_update == 1));
            h.trainer->add_callback(h.callbacks.back().get());
          },
          nb::arg("callback"),
          "Adds an object's on_start() and on_gradients_ready() as a callback. When the object's "
          "applies_update is true (read once, here), its on_gradients_ready leaves the updated "
          "weights in the net and the solver applies no update of its own (pstrain.caffe.NCCL "
          "across processes).")
      .def(
          "_solver_prototxt",
          [](SolverHandle& h) {
            std::string text;
            if (!google::protobuf::TextFormat::PrintToString(h.trainer->solver(), &text)) {
              throw std::runtime_error("the solver's parameters do not print as text");
            }
            return text;
          },
          "The solver's parameters as this solver runs them (the class's type, base_lr as set), "
          "in prototxt text.");

  nb::class_<SGDSolverHandle, SolverHandle>(m, "SGDSolver")
      .def(
          "__init__",
          [](SGDSolverHandle* self, const std::string& path) {
            new (self) SGDSolverHandle();
            MakeSolver(self, path, "SGD");
          },
          nb::arg("filename"));
  BindSolverClass<NesterovSolverHandle>(m, "NesterovSolver", "Nesterov");
  BindSolverClass<AdaGradSolverHandle>(m, "AdaGradSolver", "AdaGrad");
  BindSolverClass<RMSPropSolverHandle>(m, "RMSPropSolver", "RMSProp");
  BindSolverClass<AdaDeltaSolverHandle>(m, "AdaDeltaSolver", "AdaDelta");
  BindSolverClass<AdamSolverHandle>(m, "AdamSolver", "Adam");

  m.def(
      "get_solver",
      [](const std::string& path) -> nb::object {
        caffe::SolverParameter solver;
        ThrowIfError(ReadTextProto(path, &solver));
        std::string type = solver.type();
        if (solver.has_solver_type() && !solver.has_type()) {
          // The legacy enum (upgraded as Caffe upgrades it).
          static const char* kNames[] = {"SGD",     "Nesterov", "AdaGrad",
                                         "RMSProp", "AdaDelta", "Adam"};
          const int t = static_cast<int>(solver.solver_type());
          if (t >= 0 && t < 6) type = kNames[t];
        }
        auto make = [&](auto* tag) -> nb::object {
          using Handle = std::remove_pointer_t<decltype(tag)>;
          auto* h = new Handle();
          try {
            MakeSolver(h, path, "");
          } catch (...) {
            delete h;
            throw;
          }
          return nb::cast(h, nb::rv_policy::take_ownership);
        };
        if (type == "Nesterov") return make(static_cast<NesterovSolverHandle*>(nullptr));
        if (type == "AdaGrad") return make(static_cast<AdaGradSolverHandle*>(nullptr));
        if (type == "RMSProp") return make(static_cast<RMSPropSolverHandle*>(nullptr));
        if (type == "AdaDelta") return make(static_cast<AdaDeltaSolverHandle*>(nullptr));
        if (type == "Adam") return make(static_cast<AdamSolverHandle*>(nullptr));
        return make(static_cast<SGDSolverHandle*>(nullptr));  // SGD; an unknown type fails there
      },
      nb::arg("filename"), "A solver of the type its file names (Caffe's get_solver).");
}

}  // namespace pstrain::python
