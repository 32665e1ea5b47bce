// Rewrites of a NetParameter before a Net is built, as Caffe does them:
//  - FilterNet keeps the layers whose include/exclude rules match a NetState
//    (phase, level, stages);
//  - InsertSplits adds a "Split" layer wherever one top feeds several bottoms
//    (or feeds a bottom and also carries a loss weight), so each consumer gets
//    its own gradient buffer and the producer receives their sum.
#pragma once

#include <vector>

#include "common/status.hpp"
#include "proto/caffe.pb.h"

namespace pstrain {

bool StateMeetsRule(const caffe::NetState& state, const caffe::NetStateRule& rule);

// REQUIRES: no layer has both include and exclude (returns an error naming it).
// `lines` (optional, one per layer of `in`) is filtered alongside.
Status FilterNet(const caffe::NetParameter& in, const caffe::NetState& state,
                 caffe::NetParameter* out, std::vector<int>* lines);

// `lines` (optional) is updated so that each inserted split layer carries the
// line of its producer.
void InsertSplits(const caffe::NetParameter& in, caffe::NetParameter* out, std::vector<int>* lines);

}  // namespace pstrain
