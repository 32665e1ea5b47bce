// Validate: every received message is checked before it touches state
// (DESIGN §7). A rejected message is dropped by the caller with the reason
// logged and counted; it never changes a weight.
#pragma once

#include <cstdint>

#include "common/ps/key_placement.hpp"
#include "common/status.hpp"
#include "common/transport/message.hpp"

namespace pstrain::transport {

struct ValidationRules {
  uint64_t job_key = 0;  // header.job_key must equal this (0: not checked)
  int num_workers = 0;   // > 0: a WORKER sender must be in [0, num_workers)
  int num_servers = 0;   // > 0: a SERVER sender must be in [0, num_servers)
  // Set: chunk ids must exist and lengths equal the chunk's length.
  const KeyPlacement* placement = nullptr;  // not owned; must outlive the call
  int shard = -1;  // >= 0 (with placement): every chunk must be held by this shard
  int64_t min_clock = 0, max_clock = INT64_MAX;  // PUSH and PULL clocks must lie in this range
};

// Ok, or one reason (without the sender: prefix Describe(message) when
// logging), checked in this order:
//   "job key mismatch"
//   "unsupported dtype"
//   "worker 5 is not in this job (2 workers)" / "server 3 is not in this job (2 servers)"
//   "world size 3 does not match this job (2 workers)"           (HELLO)
//   "header lists 3 chunks but 2 payload frames follow"
//   "chunk 17 does not exist (12 chunks)"
//   "chunk 17 is held by shard 1, not shard 0"
//   "chunk 3 appears twice"
//   "chunk 3: header says 100 values, the chunk has 400"
//   "chunk 3: payload has 1000 bytes, the chunk needs 1600"
//   "PUSH has no clock" / "clock 900 is outside [3, 12]"          (PUSH, PULL)
// Cost: O(chunks), no work per value.
Status Validate(const InMessage& message, const ValidationRules& rules);

}  // namespace pstrain::transport
