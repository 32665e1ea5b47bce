// ssp: a pull for iteration t is answered once every clock >= t - staleness
// (SspPolicy, server/policies/arrival.hpp); gradients apply on arrival.
#include "server/policies/arrival.hpp"

namespace pstrain::server {

PSTRAIN_REGISTER_POLICY(PolicyRegistry::Entry{
    .name = "ssp",
    .rank = 0,
    .wants = [](const ShardConfig& c) { return c.mode == ConsistencyMode::kSsp; },
    .validate = {},
    .base = [](ShardCore& core) { return std::make_unique<SspPolicy>(core); },
    .wrapper = {}});

}  // namespace pstrain::server
