// Validate: every received message is checked once, where it enters a
// process, before it touches state. A server drops a rejected message with the
// reason logged and counted (ShardStats.bad_messages); a worker fails with the
// reason. Code behind the entry (ShardState::Handle, PsClient's handling of
// replies) takes validated messages and does not check them again.
#pragma once

#include <cstdint>
#include <optional>

#include "common/ps/key_placement.hpp"
#include "common/status.hpp"
#include "common/transport/message.hpp"

namespace pstrain::transport {

struct ValidationRules {
  // Set: the kind must be one this role accepts, from a sender role allowed
  // to send it, with the fields the kind needs (protocol.hpp).
  std::optional<Role> receiver;
  uint64_t job_key = 0;  // header.job_key must equal this (0: not checked)
  // Set on a CURVE socket: the (role, sender) of every header must be the
  // peer its key was admitted as (InMessage::user_id), so no key speaks for
  // another rank; and a server takes SHUTDOWN and STATS only from the
  // orchestrator's key ("control 0") or worker 0's (and GATE likewise).
  // Unset on a server (receiver SERVER) with job_key 0, SHUTDOWN, STATS and
  // GATE are refused.
  bool authenticated = false;
  int num_workers = 0;   // > 0: a WORKER sender must be in [0, num_workers)
  int num_servers = 0;   // > 0: a SERVER sender must be in [0, num_servers)
  // Set: chunk ids must exist and lengths equal the chunk's length.
  const KeyPlacement* placement = nullptr;  // not owned; must outlive the call
  // >= 0 (with placement): every chunk must be held by this shard, and a
  // PULL_REPLY's reply_chunks_total must be the number it holds.
  int shard = -1;
  int64_t min_clock = 0, max_clock = INT64_MAX;  // PUSH and PULL clocks must lie in this range
};

// Ok, or one reason (without the sender: prefix Describe(message) when
// logging), checked in this order:
//   "job key mismatch"
//   "sent as worker 0 by the key of worker 1"                     (authenticated)
//   "SHUTDOWN is accepted only from the orchestrator's key or worker 0's" (authenticated;
//                                                                  STATS, GATE too)
//   "STATS from an unauthenticated peer (this server has neither CURVE keys nor a job key)"
//                                                                 (SHUTDOWN, GATE too)
//   "unsupported dtype"
//   "a server does not accept PULL_REPLY"                         (receiver set)
//   "a server accepts PUSH only from a worker"                    (receiver set)
//   "HELLO has no world_size" / "NORM_TOTAL has no sum_squares" / "GATE has no clock"
//                                                                 (receiver set)
//   "worker 5 is not in this job (2 workers)" / "server 3 is not in this job (2 servers)"
//   "world size 3 does not match this job (2 workers)"           (HELLO)
//   "header lists 3 chunks but 2 payload frames follow"
//   CheckIpcPushShape's reasons (gpu_path.hpp)                    (Header.ipc_offsets;
//                                                                  the slices are checked
//                                                                  by the shard's reader)
//   "factors in a PULL_REPLY (only a PUSH carries them)" / "factors: 3 payload
//   frames follow, a PUSH with factors has 2"                      (Header.factors)
//   CheckChunkList's reasons                                      (placement set)
//   "chunk 3 appears twice"                                       (no placement)
//   "chunk 3: payload has 1000 bytes, the chunk needs 1600"
//   CheckFactors's reasons (common/ps/sufficient_factors.hpp)      (Header.factors)
//   "PULL_REPLY says 5 chunks in all, shard 1 holds 3"            (placement, shard)
//   "PUSH has no clock" / "clock 900 is outside [3, 12]"          (PUSH, PULL)
//   "gpu_ipc_offer in a PUSH" / "gpu_ipc_answer in a PULL"        (HELLO / HELLO_ACK only)
// Cost: O(chunks), no work per value.
Status Validate(const InMessage& message, const ValidationRules& rules);

// The chunk list of `header` against `placement`, in this order:
//   "chunk 17 does not exist (12 chunks)"
//   "chunk 17 is held by shard 1, not shard 0"                    (shard >= 0)
//   "chunk 3 appears twice"
//   "chunk 3: header says 100 values, the chunk has 400"
//   "it carries 1 of shard 0's 2 chunks"                          (complete)
// `complete`: the list must hold every chunk of `shard` (an INIT_PUSH, which a
// shard checks against the placement it builds from the message itself).
Status CheckChunkList(const Header& header, const KeyPlacement& placement, int shard,
                      bool complete);

}  // namespace pstrain::transport
