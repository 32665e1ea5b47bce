// Building a solver's nets without their data, for `ps-net check` (and
// `ps-train --dry-run`, which runs it): every layer type, blob wiring, shape,
// shared parameter, initial weights file and solver feature is checked as
// `ps-net train` would meet it, while each Data layer reads only the first
// record of its source (for the shape it delivers) and nothing trains.
//
// The rewrite: every Data layer that the net's state keeps is checked as the
// Data layer's set-up checks it (source, batch_size, backend, rand_skip),
// its LMDB opened and its first record read and transformed in shape, and
// the layer replaced by an Input layer of the tops' shapes, keeping its
// name, tops, rules and place (so layer i is still at line lines[i]).
// Errors name "<file>:<line>: layer '<name>' (Data)".
#pragma once

#include <string>
#include <vector>

#include "common/status.hpp"
#include "proto/caffe.pb.h"
#include "worker/layer.hpp"

namespace pstrain {

struct NetWithoutData {
  caffe::NetParameter param;     // upgraded, Data layers replaced
  std::vector<int> layer_lines;  // 1-based line of each layer of param (0: unknown)
};

// Reads a net prototxt (the V1 `layers` form too), upgrades it and rewrites it
// for `state` (Net::Init merges the net's own level and stages in as here).
Result<NetWithoutData> ReadNetWithoutData(const std::string& path, const caffe::NetState& state);
// The same for a parsed net (an inline net_param; `source` names it, `lines` may be empty).
Result<NetWithoutData> NetParamWithoutData(const caffe::NetParameter& param,
                                           const std::string& source, const caffe::NetState& state,
                                           std::vector<int> lines = {});

// What `ps-net check` found in a solver that builds.
struct SolverCheck {
  std::string train_net;  // the train net's name
  int train_layers = 0;   // layers of the train net (splits included)
  int64_t learnable_values = 0;
  int test_nets = 0;
  std::vector<std::string> outputs;  // the train net's output blobs
  // The train net's Input tops, "name NxCxHxW": its Data layers' stand-ins
  // (and Input layers of its own).
  std::vector<std::string> inputs;
};

struct SolverCheckOptions {
  std::string weights;  // as ps-net train's -weights (replaces the solver's `weights`)
  Engine engine = Engine::kReference;
};

// Builds the solver's TRAIN net and TEST nets without data (above) with the
// solver's settings, loads its initial weights, and reports the nets.
// Errors as `ps-net train` would stop with them, each naming file:line.
Result<SolverCheck> CheckSolver(const std::string& solver_path, const SolverCheckOptions& options);

}  // namespace pstrain
