// The averaging factor of a parameter-server step, shared by the shard's
// consistency policies (server/consistency_policy.hpp: StepScale) and the
// worker's replica of a broadcast weight (common/ps/factor_replica.hpp), so
// both scale a step's sum by the same float.
#pragma once

namespace pstrain {

// clip / (gradients * iter_size): the factor that turns a sum of `gradients`
// gradients, each accumulated over iter_size iterations, into their average
// (times the clip factor). Every step of every policy is scaled by it.
float AveragingScale(int gradients, int iter_size, float clip = 1.f);

}  // namespace pstrain
