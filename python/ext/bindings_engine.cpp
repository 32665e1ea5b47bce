// What the orchestrator (python/pstrain) asks the engine instead of keeping
// copies of it: a net's shapes and learnable parameters without running it
// (net_shapes), the servers' key placement (common/ps/key_placement.hpp), and
// the solver type and lr policy names (common/optim/solver_hyper.hpp; the
// layer type names are layer_type_list, module.cpp).
//
// net_shapes builds the net as `ps-net check` does (worker/net_check.hpp: a
// Data layer reads its first record only and becomes an Input of that shape)
// with the reference engine, no fusion and no engine auto: Net's set-up
// reshapes every top without touching its memory (common/synced_memory.hpp
// allocates on first access), so only the learnable parameters (filled by
// their fillers) take memory; ResNet-50 at batch 256 stays near its 100 MB of
// weights instead of the gigabytes its activations would need.
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <string>
#include <tuple>
#include <vector>

#include "common/optim/solver_hyper.hpp"
#include "common/optim/update_rule_registry.hpp"
#include "common/ps/key_placement.hpp"
#include "python/ext/bindings.hpp"
#include "worker/net_check.hpp"

namespace pstrain::python {
namespace {

nb::list ShapeList(const std::vector<int>& shape) {
  nb::list out;
  for (int d : shape) out.append(d);
  return out;
}

caffe::Phase PhaseByName(const std::string& name) {
  if (name == "TRAIN" || name == "train") return caffe::TRAIN;
  if (name == "TEST" || name == "test") return caffe::TEST;
  throw std::invalid_argument("net_shapes: phase must be 'TRAIN' or 'TEST', got '" + name + "'");
}

nb::dict NetShapes(const std::string& path, const std::string& phase, int level,
                   const std::vector<std::string>& stages) {
  caffe::NetState state;
  state.set_phase(PhaseByName(phase));
  state.set_level(level);
  for (const std::string& s : stages) state.add_stage(s);
  std::unique_ptr<Net> net;
  {
    nb::gil_scoped_release release;
    Result<NetWithoutData> read = ReadNetWithoutData(path, state);
    if (read.ok()) {
      NetOptions options;
      options.state = state;
      options.source = path;
      options.layer_lines = read.value().layer_lines;
      options.context.engine = Engine::kReference;
      options.fuse_layers = false;
      options.autotune.enabled = false;
      Result<std::unique_ptr<Net>> made = Net::Create(read.value().param, options);
      if (!made.ok()) {
        nb::gil_scoped_acquire acquire;
        ThrowIfError(made.status());
      }
      net = std::move(made).value();
    } else {
      nb::gil_scoped_acquire acquire;
      ThrowIfError(read.status());
    }
  }
  nb::list layers;
  for (size_t i = 0; i < net->layers().size(); ++i) {
    const Layer& layer = *net->layers()[i];
    nb::dict entry;
    entry["name"] = layer.name();
    entry["type"] = std::string(layer.type());
    nb::list bottoms, tops, top_shapes, param_shapes;
    for (int id : net->bottom_ids(static_cast<int>(i))) bottoms.append(net->blob_names()[id]);
    for (int id : net->top_ids(static_cast<int>(i))) {
      tops.append(net->blob_names()[id]);
      top_shapes.append(ShapeList(net->blob(id)->shape()));
    }
    for (const auto& blob : net->layers()[i]->blobs()) param_shapes.append(ShapeList(blob->shape()));
    entry["bottoms"] = bottoms;
    entry["tops"] = tops;
    entry["top_shapes"] = top_shapes;
    entry["param_shapes"] = param_shapes;
    layers.append(entry);
  }
  nb::list params;
  for (const LearnableParam& p : net->learnable_params()) {
    nb::dict entry;
    entry["layer"] = p.layer;
    entry["layer_index"] = p.layer_index;
    entry["index"] = p.index;
    entry["name"] = p.name;
    entry["shape"] = ShapeList(p.blob->shape());
    entry["count"] = static_cast<long long>(p.blob->count());
    entry["lr_mult"] = p.lr_mult;
    entry["decay_mult"] = p.decay_mult;
    // Whether the layer computes this parameter's gradient (Caffe's
    // param_propagate_down: false for lr_mult 0 and for BatchNorm's statistics).
    entry["learns"] = net->layers()[p.layer_index]->param_propagate_down(p.index);
    params.append(entry);
  }
  nb::dict out;
  out["name"] = net->name();
  out["layers"] = layers;
  out["params"] = params;
  return out;
}

std::vector<std::tuple<uint32_t, int, int64_t, int64_t, int>> Placement(
    const std::vector<int64_t>& sizes, int num_shards, int64_t chunk_bytes) {
  KeyPlacement placement = ValueOrThrow(KeyPlacement::Create(sizes, num_shards, chunk_bytes));
  std::vector<std::tuple<uint32_t, int, int64_t, int64_t, int>> out;
  out.reserve(placement.chunks().size());
  for (const Chunk& c : placement.chunks()) {
    out.emplace_back(c.id, c.param, c.offset, c.length, c.shard);
  }
  return out;
}

template <size_t N>
std::vector<std::string> Names(const std::array<std::string_view, N>& names) {
  return {names.begin(), names.end()};
}

}  // namespace

void BindEngineQueries(nb::module_& m) {
  m.def("net_shapes", &NetShapes, nb::arg("path"), nb::arg("phase") = "TRAIN",
        nb::arg("level") = 0, nb::arg("stages") = std::vector<std::string>{},
        "The net of a prototxt as the engine builds it for `phase`, without running it and "
        "without allocating its activations: {'name', 'layers': [{'name', 'type', 'bottoms', "
        "'tops', 'top_shapes', 'param_shapes'}], 'params': [{'layer', 'layer_index', 'index', "
        "'name', 'shape', 'count', 'lr_mult', 'decay_mult', 'learns'}]} (params: the learnable "
        "parameters in Net::learnable_params order). A bad net raises ValueError naming "
        "file:line and layer.");
  m.def("key_placement", &Placement, nb::arg("param_sizes"), nb::arg("num_shards"),
        nb::arg("chunk_bytes"),
        "The servers' chunks of parameters of `param_sizes` values each "
        "(common/ps/key_placement.hpp): (id, param, offset, length, shard) in chunk id order.");
  m.def("solver_type_list", [] { return optim::UpdateRuleRegistry::Global().Types(); },
        "The solver type names of the registered update rules (SolverParameter.type), "
        "Caffe's six first in Caffe's order.");
  m.def("lr_policy_list", [] { return Names(optim::kLrPolicies); },
        "Caffe's learning rate policies the engine implements (SolverParameter.lr_policy).");
}

}  // namespace pstrain::python
