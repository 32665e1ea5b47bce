// asp: a pull is answered at once (AspPolicy, server/policies/arrival.hpp);
// gradients apply on arrival.
#include "server/policies/arrival.hpp"

namespace pstrain::server {

PSTRAIN_REGISTER_POLICY(PolicyRegistry::Entry{
    .name = "asp",
    .rank = 0,
    .wants = [](const ShardConfig& c) { return c.mode == ConsistencyMode::kAsp; },
    .validate = {},
    .base = [](ShardCore& core) { return std::make_unique<AspPolicy>(core); },
    .wrapper = {}});

}  // namespace pstrain::server
