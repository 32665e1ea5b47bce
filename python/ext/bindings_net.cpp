// Net from Python: pycaffe's constructors, the raw accessors pycaffe.py
// builds its dictionaries from (_blobs, _blob_names, layers, _layer_names,
// _inputs, _outputs, _bottom_ids, _top_ids, _blob_loss_weights), _forward and
// _backward over a range of layers, reshape, copy_from, share_with, save,
// _set_input_arrays for a MemoryData first layer, and the per-layer hooks.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <optional>

#include "common/device.hpp"
#include "python/ext/bindings.hpp"
#include "worker/layers/memory_data_layer.hpp"

namespace pstrain::python {

// What Python handed a net and what it needs between calls: the arrays a
// MemoryData layer reads (kept alive here), the hooks, the first error a
// hook raised, and the input shapes of the last forward.
struct NetState {
  Net* net = nullptr;
  std::vector<nb::object> input_arrays;
  std::vector<nb::object> before_forward, after_forward, before_backward, after_backward;
  std::unique_ptr<nb::python_error> hook_error;
  std::vector<int> input_ids;  // the tops of the Input layers (fixed once the net is built)
  std::vector<std::vector<int>> input_shapes;
};

namespace {

std::vector<int> InputIds(const Net& net) {
  std::vector<int> ids;
  for (size_t i = 0; i < net.layers().size(); ++i) {
    if (std::string(net.layers()[i]->type()) != "Input") continue;
    for (int id : net.top_ids(static_cast<int>(i))) ids.push_back(id);
  }
  return ids;
}

std::vector<std::vector<int>> InputShapes(const NetState& state) {
  std::vector<std::vector<int>> shapes;
  for (int id : state.input_ids) shapes.push_back(state.net->blob(id)->shape());
  return shapes;
}

// Runs one list of hooks with the GIL; the first exception is kept for the
// caller to raise once the pass is over.
void RunHooks(NetState* state, const std::vector<nb::object>& hooks, int layer) {
  nb::gil_scoped_acquire gil;
  if (state->hook_error) return;
  try {
    for (const nb::object& hook : hooks) hook(layer);
  } catch (nb::python_error& e) {
    state->hook_error = std::make_unique<nb::python_error>(std::move(e));
  }
}

void InstallHooks(NetState* state) {
  LayerHooks hooks;
  auto make = [state](std::vector<nb::object> NetState::*list) -> std::function<void(int)> {
    if ((state->*list).empty()) return nullptr;
    return [state, list](int layer) { RunHooks(state, state->*list, layer); };
  };
  hooks.before_forward = make(&NetState::before_forward);
  hooks.after_forward = make(&NetState::after_forward);
  hooks.before_backward = make(&NetState::before_backward);
  hooks.after_backward = make(&NetState::after_backward);
  state->net->set_layer_hooks(std::move(hooks));
}

void RaiseHookError(NetState* state) {
  if (!state->hook_error) return;
  std::unique_ptr<nb::python_error> error = std::move(state->hook_error);
  error->restore();
  throw nb::python_error();
}

int LayerIndex(const Net& net, int index, const char* what) {
  const int n = static_cast<int>(net.layers().size());
  if (index < 0 || index >= n) {
    throw nb::index_error((std::string(what) + " layer index " + std::to_string(index) +
                           " is out of range (the net has " + std::to_string(n) + " layers)")
                              .c_str());
  }
  return index;
}

float Forward(NetHandle& h, int start, int end) {
  Net& net = *h.net;
  LayerIndex(net, start, "start");
  LayerIndex(net, end, "end");
  // Caffe reshapes every layer before its forward; a net made once and fed
  // one shape needs it only when an input blob changed shape since.
  const bool reshape = InputShapes(*h.state) != h.state->input_shapes;
  Status status;
  float loss = 0.f;
  {
    nb::gil_scoped_release release;
    if (reshape) status = net.Reshape();
    if (status.ok()) {
      loss = net.ForwardFromTo(start, end);
      status = net.RuntimeStatus();
    }
  }
  RaiseHookError(h.state.get());
  ThrowIfError(status);
  if (reshape) h.state->input_shapes = InputShapes(*h.state);
  return loss;
}

void Backward(NetHandle& h, int start, int end) {
  Net& net = *h.net;
  LayerIndex(net, start, "start");
  LayerIndex(net, end, "end");
  Status status;
  {
    nb::gil_scoped_release release;
    net.BackwardFromTo(start, end);
    status = net.RuntimeStatus();
  }
  RaiseHookError(h.state.get());
  ThrowIfError(status);
}

// One array of set_input_arrays, checked as pycaffe checks it (with the
// layer's name and the expected sizes in each message).
const float* CheckedArray(const nb::handle& array, const std::string& name, int channels,
                          int height, int width, const std::string& layer) {
  if (!nb::hasattr(array, "__array_interface__") || !nb::hasattr(array, "flags")) {
    throw std::invalid_argument(name + " must be a numpy array");
  }
  if (!nb::cast<bool>(array.attr("flags").attr("c_contiguous"))) {
    throw std::invalid_argument(name + " must be C contiguous");
  }
  const int ndim = nb::cast<int>(array.attr("ndim"));
  if (ndim != 4) {
    throw std::invalid_argument(name + " must be 4-d, got " + std::to_string(ndim) + "-d");
  }
  const std::string dtype = nb::cast<std::string>(array.attr("dtype").attr("name"));
  if (dtype != "float32") throw std::invalid_argument(name + " must be float32, got " + dtype);
  nb::tuple shape = nb::cast<nb::tuple>(array.attr("shape"));
  const char* what[] = {"number of channels", "height", "width"};
  const int expected[] = {channels, height, width};
  for (int axis = 0; axis < 3; ++axis) {
    const long long got = nb::cast<long long>(shape[axis + 1]);
    if (got != expected[axis]) {
      throw std::invalid_argument(name + " has wrong " + what[axis] + ": " + std::to_string(got) +
                                  ", MemoryData '" + layer + "' takes " +
                                  std::to_string(expected[axis]));
    }
  }
  return reinterpret_cast<const float*>(nb::cast<uintptr_t>(array.attr("ctypes").attr("data")));
}

void SetInputArrays(NetHandle& h, const nb::object& data, const nb::object& labels) {
  Net& net = *h.net;
  auto* layer =
      net.layers().empty() ? nullptr : dynamic_cast<MemoryDataLayer*>(net.layers()[0].get());
  if (layer == nullptr) {
    throw std::invalid_argument(
        "set_input_arrays may only be called if the first layer is a "
        "MemoryDataLayer (net '" +
        net.name() + "')");
  }
  const float* d = CheckedArray(data, "data array", layer->channels(), layer->height(),
                                layer->width(), layer->name());
  const float* l = CheckedArray(labels, "labels array", 1, 1, 1, layer->name());
  const long long n = nb::cast<long long>(data.attr("shape")[0]);
  if (n != nb::cast<long long>(labels.attr("shape")[0])) {
    throw std::invalid_argument("data and labels must have the same first dimension");
  }
  if (n % layer->batch_size() != 0) {
    throw std::invalid_argument(
        "first dimensions of input arrays must be a multiple of batch "
        "size (" +
        std::to_string(n) + " samples, MemoryData '" + layer->name() + "' has batch_size " +
        std::to_string(layer->batch_size()) + ")");
  }
  ThrowIfError(layer->Reset(d, l, n));
  h.state->input_arrays = {data, labels};
}

void AddHook(NetHandle& h, std::vector<nb::object> NetState::*list, nb::object hook) {
  if (!PyCallable_Check(hook.ptr())) throw nb::type_error("a net hook must be callable");
  (h.state.get()->*list).push_back(std::move(hook));
  InstallHooks(h.state.get());
}

void MakeNet(NetHandle* self, const std::string& file, int phase, int level,
             const std::optional<std::vector<std::string>>& stages,
             const std::optional<std::string>& weights) {
  if (phase != caffe::TRAIN && phase != caffe::TEST) {
    throw std::invalid_argument("phase must be caffe.TRAIN (0) or caffe.TEST (1), got " +
                                std::to_string(phase));
  }
  NetOptions options = NetOptionsFromSettings(static_cast<caffe::Phase>(phase));
  options.state.set_level(level);
  if (stages) {
    for (const auto& s : *stages) options.state.add_stage(s);
  }
  auto net = Net::FromFile(file, options);
  ThrowIfError(net.status());
  std::unique_ptr<Net> owned = std::move(net).value();
  if (weights) ThrowIfError(owned->CopyTrainedLayersFromFile(*weights));
  NetHandle* h = new (self) NetHandle();
  h->net = owned.get();
  h->owned = std::move(owned);
  h->state = NewNetState(h->net);
}

}  // namespace

std::shared_ptr<NetState> NewNetState(Net* net) {
  auto state = std::make_shared<NetState>();
  state->net = net;
  state->input_ids = InputIds(*net);
  state->input_shapes = InputShapes(*state);
  return state;
}

NetHandle* NewBorrowedNet(Net* net, std::shared_ptr<NetState> state) {
  auto* h = new NetHandle();
  h->net = net;
  h->state = std::move(state);
  return h;
}

void BindNet(nb::module_& m) {
  nb::class_<NetHandle>(m, "Net", nb::dynamic_attr(), "A Caffe net on PSTrain's engine.")
      .def("__init__", &MakeNet, nb::arg("network_file"), nb::arg("phase"), nb::arg("level") = 0,
           nb::arg("stages") = nb::none(), nb::arg("weights") = nb::none())
      .def(
          "__init__",  // Caffe's legacy form
          [](NetHandle* self, const std::string& file, const std::string& weights, int phase) {
            MakeNet(self, file, phase, 0, std::nullopt, weights);
          },
          nb::arg("network_file"), nb::arg("pretrained_param_file"), nb::arg("phase"))
      .def(
          "__init__",  // the blog form (not Caffe's): phase TEST
          [](NetHandle* self, const std::string& file, const std::string& weights) {
            MakeNet(self, file, caffe::TEST, 0, std::nullopt, weights);
          },
          nb::arg("network_file"), nb::arg("weights"))
      .def("_forward", &Forward, nb::arg("start"), nb::arg("end"))
      .def("_backward", &Backward, nb::arg("start"), nb::arg("end"))
      .def("reshape",
           [](NetHandle& h) {
             Status s;
             {
               nb::gil_scoped_release release;
               s = h.net->Reshape();
             }
             ThrowIfError(s);
             h.state->input_shapes = InputShapes(*h.state);
           })
      .def("clear_param_diffs", [](NetHandle& h) { h.net->ClearParamDiffs(); })
      .def("copy_from",
           [](NetHandle& h, const std::string& path) {
             ThrowIfError(h.net->CopyTrainedLayersFromFile(path));
           })
      .def("share_with",
           [](NetHandle& h, const NetHandle& other) {
             ThrowIfError(h.net->ShareTrainedLayersWith(*other.net));
           })
      .def("save", [](const NetHandle& h,
                      const std::string& path) { ThrowIfError(h.net->WriteCaffemodel(path)); })
      .def("_set_input_arrays", &SetInputArrays)
      .def("before_forward",
           [](NetHandle& h, nb::object f) { AddHook(h, &NetState::before_forward, std::move(f)); })
      .def("after_forward",
           [](NetHandle& h, nb::object f) { AddHook(h, &NetState::after_forward, std::move(f)); })
      .def("before_backward",
           [](NetHandle& h, nb::object f) { AddHook(h, &NetState::before_backward, std::move(f)); })
      .def("after_backward",
           [](NetHandle& h, nb::object f) { AddHook(h, &NetState::after_backward, std::move(f)); })
      .def_prop_ro("name", [](const NetHandle& h) { return h.net->name(); })
      .def_prop_ro("phase", [](const NetHandle& h) { return static_cast<int>(h.net->phase()); })
      .def_prop_ro("_blob_names", [](const NetHandle& h) { return h.net->blob_names(); })
      .def_prop_ro("_blobs",
                   [](nb::handle self) {
                     const NetHandle& h = nb::cast<const NetHandle&>(self);
                     nb::list list;
                     for (int i = 0; i < h.net->num_blobs(); ++i) {
                       nb::object b = nb::cast(BlobHandle{h.net->blob(i)});
                       nb::keep_alive_obj(b, self);
                       list.append(b);
                     }
                     return list;
                   })
      .def_prop_ro("layers",
                   [](nb::handle self) {
                     const NetHandle& h = nb::cast<const NetHandle&>(self);
                     nb::list list;
                     for (const auto& layer : h.net->layers())
                       list.append(LayerObject(layer.get(), self));
                     return list;
                   })
      .def_prop_ro("_layer_names",
                   [](const NetHandle& h) {
                     std::vector<std::string> names;
                     for (const auto& layer : h.net->layers()) names.push_back(layer->name());
                     return names;
                   })
      .def_prop_ro("_inputs", [](const NetHandle& h) { return h.state->input_ids; })
      .def_prop_ro("_outputs",
                   [](const NetHandle& h) {
                     std::vector<int> ids;
                     const auto& names = h.net->blob_names();
                     for (const auto& out : h.net->output_blob_names()) {
                       for (int i = static_cast<int>(names.size()) - 1; i >= 0; --i) {
                         if (names[i] == out) {
                           ids.push_back(i);
                           break;
                         }
                       }
                     }
                     return ids;
                   })
      .def("_bottom_ids", [](const NetHandle& h,
                             int i) { return h.net->bottom_ids(LayerIndex(*h.net, i, "layer")); })
      .def("_top_ids",
           [](const NetHandle& h, int i) { return h.net->top_ids(LayerIndex(*h.net, i, "layer")); })
      .def_prop_ro("_blob_loss_weights", [](const NetHandle& h) {
        std::vector<float> weights(h.net->num_blobs(), 0.f);
        for (size_t i = 0; i < h.net->layers().size(); ++i) {
          const auto& tops = h.net->top_ids(static_cast<int>(i));
          for (size_t t = 0; t < tops.size(); ++t) {
            weights[tops[t]] = h.net->layers()[i]->loss(static_cast<int>(t));
          }
        }
        return weights;
      });
}

}  // namespace pstrain::python
