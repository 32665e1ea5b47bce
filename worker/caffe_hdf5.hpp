// Caffe's HDF5 snapshots (solver `snapshot_format: HDF5`): a model
// `<prefix>_iter_N.caffemodel.h5` and a solver state
// `<prefix>_iter_N.solverstate.h5`, read into the protobuf messages the
// binary formats parse to, so that every reader of weights and solver state
// takes either. Caffe picks the format by the file name ending in ".h5"
// (Net::CopyTrainedLayersFrom, Solver::Restore); so do we.
//
// The layouts, as Caffe's Net::ToHDF5 and SGDSolver's
// SnapshotSolverStateToHDF5 write them:
//   model:  group "data", in it one group per layer (every layer, also those
//           without parameters), in it one float dataset per parameter blob
//           named by its index ("0", "1", ...), shaped as the blob. A blob
//           shared with an earlier layer is written by its owner only.
//   state:  "iter" and "current_step" (int datasets of one value),
//           "learned_net" (a string: the model's path; optional), group
//           "history" with the solver's history blobs "0".."n-1" in Caffe's
//           order (the binary .solverstate's `history`).
//           With snapshot_diff a group "diff" beside "data" holds every
//           blob's diff, shared ones too.
// Both are written whole to memory first and then put in place atomically.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/status.hpp"
#include "proto/caffe.pb.h"

namespace pstrain {

// The first of the layer names `names` that Caffe's HDF5 model cannot hold
// (each is a group of "data": HDF5 reads a '/' as a path, "" and "." name no
// group, a name twice would be one group for two layers; Caffe's own
// snapshot fails on each), with why: "a '/' in its name", "an empty name",
// "the name '.'", "a name an earlier layer has". nullopt: all can be written.
std::optional<std::pair<std::string, std::string>> UnwritableHdf5LayerName(
    const std::vector<std::string>& names);

// What Caffe adds to a snapshot's ".caffemodel" and ".solverstate" for the
// solver's snapshot_format: ".h5" for HDF5, nothing for BINARYPROTO.
std::string SnapshotSuffix(const caffe::SolverParameter& solver);

// Caffe's test: the path ends in ".h5".
bool IsHdf5SnapshotPath(const std::string& path);

// The layers of the model's "data" group as a NetParameter holding only
// names and blobs (shape and data). A layer group whose datasets do not run
// 0..k-1 (a blob shared in Caffe's net and so left out, before one that is
// not) is refused, naming the layer and the missing dataset.
Status ReadCaffemodelHdf5(const std::string& path, caffe::NetParameter* out);

// The state as a SolverState (iter, current_step, learned_net when present,
// history). Errors name the file and the dataset.
Status ReadSolverStateHdf5(const std::string& path, caffe::SolverState* out);

// Either format, by the name: ReadCaffemodelHdf5 for "*.h5", else the
// binary NetParameter.
Status ReadCaffemodelFile(const std::string& path, caffe::NetParameter* out);

// Either format, by the name: ReadSolverStateHdf5 for "*.h5", else the
// binary SolverState.
Status ReadSolverStateFile(const std::string& path, caffe::SolverState* out);

// Either format, by the name: WriteSolverStateHdf5 for "*.h5", else the
// binary SolverState (written atomically either way).
Status WriteSolverStateFile(const caffe::SolverState& state, const std::string& path);

// Writes `model` (every layer with its blobs, as Net::ToProto gives them:
// shape, data and, when `write_diff`, diff) in Caffe's HDF5 model layout.
// `shared`: the (layer, blob) indices whose blob belongs to an earlier layer
// (ParamSpec sharing); their data is left out, as Caffe does. A layer name
// of UnwritableHdf5LayerName is refused before anything is written: "<path>:
// layer 'a/b' cannot be written in snapshot_format HDF5 (a '/' in its name);
// use BINARYPROTO".
Status WriteCaffemodelHdf5(const caffe::NetParameter& model,
                           const std::set<std::pair<int, int>>& shared, bool write_diff,
                           const std::string& path);

// Writes `state` (iter, current_step, learned_net, history) in Caffe's HDF5
// solver-state layout.
Status WriteSolverStateHdf5(const caffe::SolverState& state, const std::string& path);

}  // namespace pstrain
