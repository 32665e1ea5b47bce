// pstrain._core: the module, its process-wide settings (pycaffe's
// set_mode_cpu/gpu, set_device, set_random_seed, the multi-GPU counters),
// and the mapping from engine Status to Python exceptions.
#include <google/protobuf/descriptor.pb.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdio>
#include <memory>
#include <random>
#include <utility>

#include "common/device.hpp"
#include "proto/caffe.pb.h"
#include "python/ext/bindings.hpp"
#include "worker/layer_registry.hpp"
#include "worker/net_autotune.hpp"

namespace pstrain::python {

namespace {

// The Python layer exception kept by KeepLayerError; touched only with the GIL
// held. Deliberately never freed at exit (the interpreter may be gone).
struct KeptLayerError {
  nb::python_error error;
  std::string message;
};
KeptLayerError* kept_layer_error = nullptr;

}  // namespace

void KeepLayerError(nb::python_error& error, const std::string& message) {
  delete kept_layer_error;
  kept_layer_error = new KeptLayerError{std::move(error), message};
}

void ThrowIfError(const Status& status) {
  if (status.ok()) return;
  const std::string& message = status.message();
  if (kept_layer_error != nullptr) {
    std::unique_ptr<KeptLayerError> kept(std::exchange(kept_layer_error, nullptr));
    if (message.find(kept->message) != std::string::npos) {
      nb::object value = nb::borrow(kept->error.value());
      if (nb::hasattr(value, "add_note")) value.attr("add_note")(nb::str(message.c_str()));
      kept->error.restore();
      throw nb::python_error();
    }
  }
  switch (status.code()) {
    case StatusCode::kNotFound:
      PyErr_SetString(PyExc_FileNotFoundError, message.c_str());
      throw nb::python_error();
    case StatusCode::kInvalidArgument:
    case StatusCode::kCorruption:
      throw std::invalid_argument(message);
    case StatusCode::kResourceExhausted:
      PyErr_SetString(PyExc_MemoryError, message.c_str());
      throw nb::python_error();
    case StatusCode::kIOError:
      PyErr_SetString(PyExc_OSError, message.c_str());
      throw nb::python_error();
    default:
      throw std::runtime_error(message);
  }
}

Settings& CurrentSettings() {
  static Settings settings;  // pycaffe's Caffe singleton: one per process
  return settings;
}

NetOptions NetOptionsFromSettings(caffe::Phase phase) {
  const Settings& s = CurrentSettings();
  NetOptions options;
  options.state.set_phase(phase);
  options.context.memory_data_from_caller = true;
  options.context.seed = s.seeded ? s.seed : std::random_device()();
  if (s.gpu) {
    ThrowIfError(
        UseCudaDevice(s.device, "caffe.set_mode_gpu() with device " + std::to_string(s.device)));
    options.context.engine = Engine::kGpu;
  } else {
    options.context.engine = s.engine;
    options.autotune.enabled = s.autotune && s.engine == Engine::kFast;
    options.autotune.cache_path = DefaultAutotuneCachePath();
  }
  return options;
}

namespace {

std::string CaffeProtoDescriptor() {
  google::protobuf::FileDescriptorProto file;
  caffe::NetParameter::descriptor()->file()->CopyTo(&file);
  std::string bytes;
  file.SerializeToString(&bytes);
  return bytes;
}

}  // namespace

void BindModuleFunctions(nb::module_& m) {
  m.def("set_mode_cpu", [] { CurrentSettings().gpu = false; });
  m.def("set_mode_gpu", [] {
    if (!BuiltWithCuda()) {
      throw std::runtime_error("set_mode_gpu: this PSTrain was built without CUDA");
    }
    CurrentSettings().gpu = true;
  });
  m.def("set_device", [](int device) {
    if (device < 0) throw std::invalid_argument("set_device: device must be >= 0");
    if (BuiltWithCuda())
      ThrowIfError(UseCudaDevice(device, "set_device(" + std::to_string(device) + ")"));
    CurrentSettings().device = device;
  });
  m.def("set_random_seed", [](long long seed) {
    CurrentSettings().seeded = true;
    CurrentSettings().seed = static_cast<uint64_t>(seed);
  });
  m.def(
      "set_engine",
      [](const std::string& name) {
        Settings& s = CurrentSettings();
        if (name == "auto") {
          s.engine = Engine::kFast;
          s.autotune = true;
        } else if (name == "fast") {
          s.engine = Engine::kFast;
          s.autotune = false;
        } else if (name == "reference") {
          s.engine = Engine::kReference;
          s.autotune = false;
        } else {
          throw std::invalid_argument("set_engine: 'auto', 'fast' or 'reference', got '" + name +
                                      "'");
        }
      },
      "The CPU engine of nets made from now on (ps-net's --engine; default auto).");
  m.def("layer_type_list", [] { return LayerRegistry::Global().Types(); });
  m.def("solver_count", [] { return CurrentSettings().solver_count; });
  m.def("set_solver_count", [](int n) {
    if (n < 1) throw std::invalid_argument("set_solver_count: count must be >= 1");
    CurrentSettings().solver_count = n;
  });
  m.def("solver_rank", [] { return CurrentSettings().solver_rank; });
  m.def("set_solver_rank", [](int r) {
    if (r < 0) throw std::invalid_argument("set_solver_rank: rank must be >= 0");
    CurrentSettings().solver_rank = r;
  });
  m.def("set_multiprocess", [](bool on) { CurrentSettings().multiprocess = on; });
  m.def("multiprocess", [] { return CurrentSettings().multiprocess; });
  m.def("has_cuda", [] { return BuiltWithCuda(); });
  m.def("cuda_device_count", [] { return BuiltWithCuda() ? CudaDeviceCount() : 0; });
  m.def(
      "init_log", [](int level, bool /*stderr*/) { CurrentSettings().log_level = level; },
      nb::arg("level") = 0, nb::arg("stderr") = false);
  m.def("log", [](const std::string& line) {
    if (CurrentSettings().log_level <= 0) std::fprintf(stderr, "%s\n", line.c_str());
  });
  m.def("caffe_proto_descriptor", [] {
    const std::string bytes = CaffeProtoDescriptor();
    return nb::bytes(bytes.data(), bytes.size());
  });
}

}  // namespace pstrain::python

NB_MODULE(_core, m) {
  namespace py = pstrain::python;
  m.doc() = "PSTrain's engine for Python (pstrain.caffe builds pycaffe's interface on it)";
  // A net or solver still referenced by a script's globals at exit is freed
  // after the interpreter has started to shut down; nanobind would report it
  // as a leak on every such run.
  nanobind::set_leak_warnings(false);
  m.attr("__version__") = PSTRAIN_VERSION_STRING;
  py::BindBlob(m);
  py::BindLayer(m);
  py::BindNet(m);
  py::BindSolver(m);
  py::BindPsClient(m);
  py::BindModuleFunctions(m);
  py::BindEngineQueries(m);
  py::InstallPythonLayerBridge();
}
