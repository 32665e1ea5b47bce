// Format upgrades: bring NetParameter and SolverParameter messages written
// for older Caffe versions to the current form, as Caffe's upgrade_proto does,
// so that the rest of the engine only ever sees V2 nets (`layer`, string
// types, ParamSpec, transform_param, Input layers) and string solver types.
//
// Net upgrades, applied in this order:
//   1. V0 nets (V1 `layers` entries that embed a V0 `layer`, pre-2014) are NOT
//      supported: UpgradeNet returns "V0 (pre-2014) nets are not supported:
//      <source> (layers[i] "<name>" holds a V0 layer)". Convert them with an
//      old Caffe's upgrade_net_proto_text first.
//   2. V1 nets (`layers`, V1LayerParameter): every layer becomes a
//      LayerParameter: type enum -> type string, blobs (learned weights) moved,
//      blobs_lr -> param.lr_mult, weight_decay -> param.decay_mult,
//      param names and blob_share_mode -> param.name / param.share_mode,
//      include/exclude, loss_weight and every *_param message copied.
//   3. Data, ImageData and WindowData layers whose data_param /
//      image_data_param / window_data_param still carry scale, mean_file,
//      crop_size or mirror: those move to transform_param.
//   4. Net-level `input` with `input_shape` or `input_dim` (4 values per
//      input): an "Input" layer named "input" at the front, the fields cleared.
//   5. BatchNorm layers whose `param` entries all have lr_mult 0 (the old way
//      of freezing the statistics): the param entries are removed.
//
// Solver upgrade: the deprecated `solver_type` enum becomes the `type` string;
// nets embedded in the solver (net_param, train_net_param, test_net_param)
// are upgraded as above.
//
// Errors name the source (a file name, given by the caller) and the layer.
// On error the message may be partly upgraded and must be discarded.
#pragma once

#include <string>

#include "common/status.hpp"
#include "proto/caffe.pb.h"

namespace pstrain {

// True when UpgradeNet would change `net` (or reject it as V0).
bool NetNeedsUpgrade(const caffe::NetParameter& net);
// Upgrades `net` in place; a no-op (Ok) on a net that needs no upgrade.
// `source_name` (usually the file name) is put in front of every error.
Status UpgradeNet(caffe::NetParameter* net, const std::string& source_name);

// True when UpgradeSolver would change `solver`.
bool SolverNeedsUpgrade(const caffe::SolverParameter& solver);
// Upgrades `solver` in place. Errors if solver_type and type are both given
// and name different solvers.
Status UpgradeSolver(caffe::SolverParameter* solver, const std::string& source_name);

// The V2 type string of a V1 layer type ("Convolution", "SoftmaxWithLoss", ...);
// empty for NONE and for values outside the enum.
std::string V1LayerTypeName(caffe::V1LayerParameter::LayerType type);

}  // namespace pstrain
