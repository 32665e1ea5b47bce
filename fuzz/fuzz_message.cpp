// Fuzz target "message": network messages into one parameter-server shard,
// through the same steps ShardLoop takes for each arrival: frame 0 parsed
// as a pstrain::Header, payload frames aligned, transport::Validate against
// ShardState::RulesFor, then ShardState::Handle. The worker side's checks of
// server answers (Validate as a WORKER, ReadHelloAck) see the same headers.
//
// Input layout (fuzz/message_input.hpp writes it; the seeds are real
// encoder output):
//   byte 0    the shard's set-up: mode = b % 3 (bsp, ssp, asp); bit 2: two
//             workers; bit 3: two shards; bit 4: this is shard 1 of two;
//             bit 5: clip_gradients (norm exchange); bit 6: the step gate
//   then      messages: u8 frame count (at most 8), then per frame a u16
//             little-endian length and that many bytes (cut at the end).
// Properties checked (a violation aborts): what Handle returns is sendable
// (one payload of chunks[i].length values per chunk, as Channel::Send
// requires), and the statistics never go negative.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <utility>
#include <vector>

#include "common/transport/message.hpp"
#include "common/transport/protocol.hpp"
#include "common/transport/validate.hpp"
#include "fuzz/fuzz_util.hpp"
#include "fuzz/message_input.hpp"
#include "server/shard_state.hpp"

namespace {

using pstrain::server::Incoming;
using pstrain::server::Outgoing;
using pstrain::server::ShardConfig;
using pstrain::server::ShardState;

void Require(bool holds, const char* what) {
  if (!holds) {
    std::fprintf(stderr, "fuzz_message: property broken: %s\n", what);
    std::abort();
  }
}

void CheckSendable(const std::vector<Outgoing>& out) {
  for (const Outgoing& o : out) {
    Require(static_cast<size_t>(o.header.chunks_size()) == o.payloads.size(),
            "an outgoing message has one payload per chunk");
    for (int i = 0; i < o.header.chunks_size(); ++i) {
      Require(o.payloads[static_cast<size_t>(i)] != nullptr &&
                  o.payloads[static_cast<size_t>(i)]->size() == o.header.chunks(i).length(),
              "an outgoing payload has the chunk's length");
    }
  }
}

// PSTRAIN_FUZZ_VERBOSE=1: one line per message (kind, sender, verdict), to
// check what a seed reaches.
const bool kVerbose = std::getenv("PSTRAIN_FUZZ_VERBOSE") != nullptr;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  pstrain::fuzz::MessageInput input(data, size);
  ShardConfig config = pstrain::fuzz::SetupConfig(input.setup());
  ShardState shard(config);
  shard.log = [](const std::string& line) {
    if (kVerbose) std::fprintf(stderr, "  log: %s\n", line.c_str());
  };
  auto now = ShardState::TimePoint{} + std::chrono::hours(1);

  std::vector<std::string> frames;
  while (input.Next(&frames)) {
    now += std::chrono::milliseconds(7);
    if (frames.empty()) {
      shard.CountBadMessage();  // "no header frame"
      continue;
    }
    pstrain::transport::InMessage message;
    message.peer = "peer";
    if (!message.header.ParseFromArray(frames[0].data(), static_cast<int>(frames[0].size()))) {
      shard.CountBadMessage();  // "header does not parse"
      continue;
    }
    message.header_bytes = frames[0].size();
    for (size_t i = 1; i < frames.size(); ++i) {
      message.frames.emplace_back(std::string_view(frames[i]));
    }
    message.AlignPayloads();
    (void)pstrain::transport::Describe(message);  // every drop is logged with it

    // The worker's view of the same header, as if a server had sent it.
    pstrain::transport::ValidationRules worker_rules;
    worker_rules.receiver = pstrain::WORKER;
    worker_rules.placement = shard.placement();
    worker_rules.shard = config.shard;
    if (pstrain::transport::Validate(message, worker_rules).ok() &&
        message.header.type() == pstrain::HELLO_ACK) {
      (void)pstrain::transport::ReadHelloAck(message.header);
    }

    const pstrain::Status valid =
        pstrain::transport::Validate(message, shard.RulesFor(message.header));
    if (kVerbose) {
      std::fprintf(stderr, "  %s: %s\n", pstrain::transport::Describe(message).c_str(),
                   valid.ok() ? "valid" : valid.message().c_str());
    }
    if (!valid.ok()) {
      shard.CountBadMessage();
      continue;
    }
    Incoming incoming{message.peer, message.header, {}};
    for (size_t i = 0; i < message.payload_count(); ++i) {
      incoming.payloads.push_back(message.mutable_payload(i));
    }
    CheckSendable(shard.Handle(incoming, now));
    CheckSendable(shard.Tick(now));
    if (shard.done()) break;
  }
  const pstrain::ShardStats stats = shard.Stats();
  Require(stats.bad_messages() >= 0 && stats.pushes_applied() >= 0 && stats.version() >= 0,
          "statistics are non-negative");
  return 0;
}
