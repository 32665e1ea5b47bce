// The pstrain._core extension module: Python bindings of the engine (Blob,
// Layer, Net, the update rules through Trainer) that pstrain.caffe dresses as
// pycaffe. Thin: every computation is the engine's; what Python adds is in
// python/pstrain/caffe/pycaffe.py.
//
// Handles: Python objects hold non-owning pointers into the engine (a Blob of
// a Net, a Layer) plus a keep-alive reference to the object that owns it, so
// a handle never outlives its owner; numpy views of blob memory hold the
// memory itself (common/synced_memory.hpp) and stay valid after the net goes.
// The GIL is released around every forward, backward and solver step; the
// Python layers and callbacks take it back while they run.
#pragma once

#include <nanobind/nanobind.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.hpp"
#include "worker/layer.hpp"
#include "worker/net.hpp"

namespace pstrain::python {

namespace nb = nanobind;

// Raises the Python exception for a failed status (ValueError for bad input,
// FileNotFoundError, MemoryError, RuntimeError otherwise); returns on ok.
// A status that a Python layer's exception caused (KeepLayerError) raises that
// exception itself, as pycaffe does (a layer's RuntimeError stays a
// RuntimeError), with the status's message -- the net file, line, layer and
// method -- added to it as a note.
void ThrowIfError(const Status& status);
// Keeps the exception a Python layer raised, and `message`, the text of the
// failed status it became; the next ThrowIfError whose status names that text
// raises it. One is kept at a time. REQUIRES: the GIL.
void KeepLayerError(nb::python_error& error, const std::string& message);
template <typename T>
T ValueOrThrow(Result<T> result) {
  ThrowIfError(result.status());
  return std::move(result).value();
}

// The process-wide settings pycaffe keeps in its Caffe singleton: the mode
// and device nets and solvers are made with, the seed, and the multi-GPU
// bookkeeping of Caffe's python/train.py.
struct Settings {
  Engine engine = Engine::kFast;
  bool autotune = true;  // engine "auto" (the fastest CPU implementation per layer)
  bool gpu = false;
  int device = 0;
  bool seeded = false;
  uint64_t seed = 1701;
  int solver_count = 1;
  int solver_rank = 0;
  bool multiprocess = false;
  int log_level = 0;  // glog's minloglevel: 0 prints the training events (pycaffe's INFO lines)
};
Settings& CurrentSettings();
// NetOptions for a net made from Python now (engine, device, seed, autotune).
NetOptions NetOptionsFromSettings(caffe::Phase phase);

// A Blob as Python sees it: pointer plus owner kept alive by nanobind.
struct BlobHandle {
  Blob* blob = nullptr;
};
// The numpy view of a blob's data or diff (writeable, no copy).
nb::object BlobArray(Blob* blob, bool diff);
// A shape from Python arguments, f(2, 3) or f((2, 3)): checked dimensions, at
// most Blob::kMaxAxes axes and kMaxBlobValues values; errors start with `what`.
std::vector<int> ShapeFromArgs(const nb::args& args, const char* what);
// A Python list of handles for a layer's bottoms or tops (valid during a call).
nb::list BlobList(const BlobVec& blobs);

struct NetState;  // hooks and arrays handed to a net (bindings_net.cpp)

// A Net as Python sees it: owned (made from Python) or borrowed from a solver.
struct NetHandle {
  std::unique_ptr<Net> owned;
  Net* net = nullptr;
  std::shared_ptr<NetState> state;
};
NetHandle* NewBorrowedNet(Net* net, std::shared_ptr<NetState> state);
std::shared_ptr<NetState> NewNetState(Net* net);

// The Python object for a layer of a net: the Python layer object itself for
// a Python layer, else a handle.
nb::object LayerObject(Layer* layer, nb::handle owner);

void BindBlob(nb::module_& m);
void BindLayer(nb::module_& m);
void BindNet(nb::module_& m);
void BindSolver(nb::module_& m);
void BindPsClient(nb::module_& m);
void BindModuleFunctions(nb::module_& m);
// net_shapes, key_placement, solver_type_list, lr_policy_list (bindings_engine.cpp).
void BindEngineQueries(nb::module_& m);
// Installs the bridge through which Python layers run (worker/layers/python_layer.hpp).
void InstallPythonLayerBridge();
// The Python object behind a Python layer (null handle for other layers).
nb::handle PythonLayerSelf(Layer* layer);

}  // namespace pstrain::python
