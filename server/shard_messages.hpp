// The messages a shard takes and gives, as ShardState sees them: validated,
// without sockets (ShardLoop turns them into and out of ZeroMQ frames).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "proto/pstrain.pb.h"

namespace pstrain::server {

// A message as the transport delivers it, validated (transport::Validate with
// ShardState::RulesFor(header)): one payload of chunks[i].length floats per
// chunk, each chunk held by this shard (but for an INIT_PUSH, which the shard
// checks against the layout it builds from it). The payloads stay valid for
// the duration of Handle only.
struct Incoming {
  std::string peer;  // the transport's id of the sender, for replies
  pstrain::Header header;
  // One per header.chunks; the shard may overwrite them (gradients are applied
  // in place, without a copy). A PUSH whose header.dtype is not FLOAT32 holds
  // its chunks as they travelled (common/transport/gradient_codec.hpp, checked
  // by CheckEncoded): the shard decodes them as it applies them.
  std::vector<float*> payloads;
  // The bytes of each payload; empty: 4 per value (float32).
  std::vector<size_t> payload_bytes;
  // Payload bytes as they travelled (compressed pushes); -1: 4 per value.
  int64_t wire_bytes = -1;
  // A PUSH with factors: its two frames as received, in factor_dtype (the
  // PUSH's Header.dtype: float32 values or 16-bit words), for the factor relay
  // (server/factor_relay.hpp). payloads then hold the chunks rebuilt from
  // them, float32, and header.dtype says FLOAT32.
  const float* factor_left = nullptr;
  const float* factor_right = nullptr;
  pstrain::DataType factor_dtype = pstrain::FLOAT32;
};

struct Outgoing {
  enum class To {
    kPeer,         // `peer`
    kCoordinator,  // server 0 (NORM_PARTIAL)
    kAllServers,   // every server but this one (NORM_TOTAL from server 0)
  } to = To::kPeer;
  std::string peer;
  pstrain::Header header;
  std::vector<std::shared_ptr<const std::vector<float>>> payloads;  // one per header.chunks
};

}  // namespace pstrain::server
