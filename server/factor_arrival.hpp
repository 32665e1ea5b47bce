// FactorArrival: a validated PUSH with sufficient factors (Header.factors,
// common/ps/sufficient_factors.hpp) turned into the Incoming that ShardState
// takes: the two frames decoded when they travelled in 16 bits
// (DecodeFactors), each listed chunk rebuilt from them (FactorRebuild), the
// rebuilt float32 chunks as the payloads with header.dtype FLOAT32, and the
// frames as they came, in their dtype, for the factor relay
// (Incoming.factor_left/right/factor_dtype; server/factor_relay.hpp).
// ShardLoop::Receive and the message fuzzer (fuzz/fuzz_message.cpp) both
// hand arrivals on through it. Not thread-safe (one per shard loop).
#pragma once

#include <vector>

#include "common/ps/factor_rebuild.hpp"
#include "common/ps/key_placement.hpp"
#include "common/transport/message.hpp"
#include "server/apply_threads.hpp"
#include "server/shard_messages.hpp"

namespace pstrain::server {

// Any other arrival: `incoming` takes the frames themselves (zero copy: the
// shard reads, and for float32 updates in place, the received frames), and for
// a compressed push (header.dtype other than FLOAT32, decoded as it is
// applied) their byte sizes and the bytes they travelled as.
void TakePayloads(transport::InMessage& message, Incoming* incoming);

class FactorArrival {
 public:
  // Fills `incoming` (its peer and header already copied from `message`):
  // payloads, wire_bytes, the factor frames and their dtype.
  // REQUIRES: message.header.has_factors() and transport::Validate accepted
  // it against `placement`. The payloads stay valid until the next Prepare;
  // the factor frames as long as `message`.
  // threads: the shard's apply threads (null: one), over which the chunks'
  // rows are rebuilt (the same floats for any count).
  void Prepare(const transport::InMessage& message, const KeyPlacement& placement,
               Incoming* incoming, ApplyThreads* threads = nullptr);

 private:
  FactorRebuild rebuild_;
  ApplyThreads* threads_ = nullptr;  // the rebuild's row ranges run on these
  std::vector<float> left_, right_;  // 16-bit frames, decoded
};

}  // namespace pstrain::server
