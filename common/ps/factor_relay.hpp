// Factor relay (sufficient-factor broadcasting, Poseidon): the geometry of a
// PULL_REPLY that answers a broadcast fc weight's chunks with every worker's
// factors of the step instead of the weights, and of the history frames a
// worker asks for to start its replica (common/ps/factor_replica.hpp).
// Shared by the shard that builds such a reply (server/factor_relay.hpp), the
// check of every message (common/transport/validate.cpp) and the worker that
// applies it (worker/ps/ps_client.cpp). docs/wire-protocol.md, "Factor relay".
//
// Per (weight, shard holding chunks of it) the reply carries, for every
// worker w, L_w's columns of the rows those chunks touch (as w pushed them
// there), and R_w only from w's holder shard, RelayHolder: so each R travels
// once per pull, not once per shard.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/ps/key_placement.hpp"
#include "common/status.hpp"
#include "proto/pstrain.pb.h"

namespace pstrain {

// The chunks of parameter `param` on `shard`, ascending.
std::vector<uint32_t> ParamChunksOn(const KeyPlacement& placement, int param, int shard);
// The shards holding chunks of `param`, ascending.
std::vector<int> ParamShards(const KeyPlacement& placement, int param);
// The shard that relays worker `worker`'s R of `param`: the param's shards
// taken in turn, ParamShards(param)[worker % their count].
int RelayHolder(const KeyPlacement& placement, int param, int worker);

// Bytes a worker pulls per step for a broadcast weight of rows x cols with
// `samples` rows of factors per worker, `workers` workers, pushed in `dtype`
// (IsFactorDtype; the relay forwards them as pushed): per shard holding
// chunks of it, every worker's L columns of the rows they touch, plus every
// worker's R once, each a frame of FactorFrameBytes.
int64_t RelayBytes(const KeyPlacement& placement, int param, int64_t cols, int64_t samples,
                   int workers, pstrain::DataType dtype);

// The PULL/PULL_REPLY fields of the relay and of history (Header.broadcast,
// history_params, history_slots, history_chunks, relay, relayed_chunks,
// relay_scale) against `placement` (null: the header's own consistency) and
// `shard` (the sender of a PULL_REPLY; -1: unknown). frame_bytes: every
// payload frame's size, in order (chunk frames, then history, then relay).
// num_workers > 0: a relayed parameter must carry exactly one entry per
// worker. Each entry's frames are in its dtype (IsFactorDtype). Errors name
// the field, the parameter and the worker: "relay: parameter 0 has the
// factors of 1 workers, the job has 2", "relay: parameter 0: worker 1's
// factors in TOP_K (they travel as FLOAT32, FLOAT16 or BFLOAT16)", "relay:
// parameter 0: worker 1's L has 40 bytes, 2 x 5 FLOAT16 need 20".
Status CheckRelay(const pstrain::Header& h, const std::vector<size_t>& frame_bytes,
                  const KeyPlacement* placement, int shard, int num_workers);

// R pushed once (ps-worker --factor-right holder): a FACTOR_RIGHT's `right`
// and its one frame against `placement` (null: the header's own consistency)
// and `shard` (the receiving shard of a forward from a worker, the sending
// shard of one to a worker; -1: unknown), and `right` in no other kind. A
// shard sends a worker's R only where it is its holder; a worker forwards it
// only to another shard of the weight. Errors name the parameter and the
// worker: "FACTOR_RIGHT: parameter 0: worker 1's R has 12 bytes, 2 x 3
// float32 need 24", "FACTOR_RIGHT: parameter 0: worker 1's R forwarded to
// server 1, its holder (which has it from the push)".
Status CheckRight(const pstrain::Header& h, const std::vector<size_t>& frame_bytes,
                  const KeyPlacement* placement, int shard, int num_workers);

}  // namespace pstrain
