// Fillers: initial values of learnable blobs from a FillerParameter
// (constant, uniform, gaussian, xavier, msra, positive_unitball, bilinear),
// with Caffe's fan-in/fan-out rules. Deterministic for a given Rng.
#pragma once

#include "common/blob.hpp"
#include "common/rng.hpp"
#include "common/status.hpp"
#include "proto/caffe.pb.h"

namespace pstrain {

// Checks the filler type and its values (e.g. bilinear needs a 4-D square
// kernel), and that the blob holds at most `max_values` values (filling
// allocates it): "a blob of shape 100000 100000 (10000000000) is larger than
// the limit of 2147483647 values".
Status ValidateFiller(const caffe::FillerParameter& filler, const Blob& blob,
                      int64_t max_values = 2147483647);
// REQUIRES: ValidateFiller(filler, *blob).ok().
void Fill(const caffe::FillerParameter& filler, Rng& rng, Blob* blob);

}  // namespace pstrain
