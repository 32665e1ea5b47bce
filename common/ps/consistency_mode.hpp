// ConsistencyMode: how a parameter-server job orders gradients and weights.
//
//   bsp  the W gradients of each iteration are summed in rank order and
//        applied as one step; a pull for iteration t waits for step t-1.
//   ssp  gradients are applied on arrival; a pull for iteration t waits until
//        every worker's clock is at least t - staleness.
//   asp  gradients are applied on arrival; pulls never wait.
// Server and worker read it from their --mode flag (ParseConsistencyMode, once,
// where the flags are parsed); the server tells it in HELLO_ACK and a worker
// checks that it agrees.
#pragma once

#include <string>

#include "common/status.hpp"

namespace pstrain {

enum class ConsistencyMode { kBsp, kSsp, kAsp };

// "bsp", "ssp", "asp".
const char* ModeName(ConsistencyMode mode);
// The inverse of ModeName. Error: `mode "sync" is not one of bsp, ssp, asp`.
Result<ConsistencyMode> ParseConsistencyMode(const std::string& name);

}  // namespace pstrain
