// Fuzz target "message": network messages into one parameter-server shard,
// through the same steps ShardLoop takes for each arrival: frame 0 parsed
// as a pstrain::Header, payload frames aligned, transport::Validate against
// ShardState::RulesFor, a push of sufficient factors decoded and rebuilt
// (server/factor_arrival.hpp), a push without R and a forwarded R paired
// (server/factor_forward.hpp), a compressed push's frame sizes passed on,
// then ShardState::Handle. The worker side's checks of
// server answers (Validate as a WORKER, ReadHelloAck) see the same headers.
//
// Input layout (fuzz/message_input.hpp writes it; the seeds are real
// encoder output):
//   byte 0    the shard's set-up: mode = b % 3 (bsp, ssp, asp); bit 2: two
//             workers; bit 3: two shards; bit 4: this is shard 1 of two;
//             bit 5: clip_gradients (norm exchange); bit 6: the step gate;
//             bit 7: host aggregation (bsp: each push stands for more workers)
//   then      messages: u8 frame count (at most 8), then per frame a u16
//             little-endian length and that many bytes (cut at the end).
// Properties checked (a violation aborts): what Handle returns is sendable
// (the payload frames transport::PayloadFrames counts, a float32 chunk's of
// its length, as Channel::Send requires); what it sends a worker passes the
// worker's own Validate (so a shard never answers with what its workers must
// refuse: relayed factors, history frames, 16-bit replies included); and the
// statistics never go negative.
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
#include "server/factor_arrival.hpp"
#include "server/factor_forward.hpp"
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

// PSTRAIN_FUZZ_VERBOSE=1: one line per message (kind, sender, verdict) and per
// answer (kind, chunks, frames, relayed factors), to
// check what a seed reaches.
const bool kVerbose = std::getenv("PSTRAIN_FUZZ_VERBOSE") != nullptr;

// The frames of `o` as a worker would receive them: the header's bytes, then
// each payload's.
pstrain::transport::InMessage Received(const Outgoing& o, std::vector<std::string>* storage) {
  storage->clear();
  for (const auto& p : o.payloads) {
    storage->emplace_back(reinterpret_cast<const char*>(p->data()), p->size() * sizeof(float));
  }
  pstrain::transport::InMessage in;
  in.header = o.header;
  in.header_bytes = o.header.ByteSizeLong();
  for (const std::string& f : *storage) in.frames.emplace_back(std::string_view(f));
  in.AlignPayloads();
  return in;
}

void CheckSendable(const std::vector<Outgoing>& out, const ShardState& shard,
                   const ShardConfig& config) {
  std::vector<std::string> storage;
  for (const Outgoing& o : out) {
    if (kVerbose) {
      std::fprintf(stderr, "  -> %s: %d chunks, %zu frames, %d relayed, %d history chunks\n",
                   pstrain::MessageType_Name(o.header.type()).c_str(), o.header.chunks_size(),
                   o.payloads.size(), o.header.relay_size(), o.header.history_chunks_size());
    }
    Require(pstrain::transport::PayloadFrames(o.header) == o.payloads.size(),
            "an outgoing message has the payload frames its header counts");
    for (const auto& p : o.payloads) Require(p != nullptr, "an outgoing payload is set");
    if (!o.header.has_factors() && o.header.dtype() == pstrain::FLOAT32) {
      for (int i = 0; i < o.header.chunks_size() && i < static_cast<int>(o.payloads.size()); ++i) {
        Require(o.payloads[static_cast<size_t>(i)]->size() == o.header.chunks(i).length(),
                "an outgoing float32 payload has the chunk's length");
      }
    }
    if (o.to != Outgoing::To::kPeer || o.header.role() != pstrain::SERVER) continue;
    // What goes to a worker passes the worker's checks (PsClient validates
    // every reply so; a shard message's kind is for workers unless it is
    // server to server).
    const pstrain::MessageType type = o.header.type();
    if (type == pstrain::NORM_PARTIAL || type == pstrain::NORM_TOTAL) continue;
    pstrain::transport::ValidationRules rules;
    rules.receiver = pstrain::WORKER;
    rules.job_key = config.job_key;
    rules.placement = shard.placement();
    rules.shard = config.shard;
    rules.num_workers = config.num_workers;
    const pstrain::Status valid = pstrain::transport::Validate(Received(o, &storage), rules);
    if (!valid.ok()) {
      std::fprintf(stderr, "fuzz_message: a %s to a worker fails its checks: %s\n",
                   pstrain::MessageType_Name(type).c_str(), valid.message().c_str());
    }
    Require(valid.ok(), "what a shard sends a worker passes the worker's Validate");
  }
}


}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  pstrain::fuzz::MessageInput input(data, size);
  ShardConfig config = pstrain::fuzz::SetupConfig(input.setup());
  ShardState shard(config);
  shard.log = [](const std::string& line) {
    if (kVerbose) std::fprintf(stderr, "  log: %s\n", line.c_str());
  };
  auto now = ShardState::TimePoint{} + std::chrono::hours(1);
  pstrain::server::FactorArrival factors;
  pstrain::server::ForwardedRights rights;

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
    // As ShardLoop::Receive hands an arrival to the shard.
    Incoming incoming{message.peer, message.header, {}, {}};
    if (message.header.ipc_offsets_size() > 0) {
      shard.CountBadMessage();  // no worker's GPU region is open here (ReadIpcPush refuses)
      continue;
    }
    if (message.header.type() == pstrain::FACTOR_RIGHT ||
        (message.header.has_factors() && message.header.factors().right_forwarded())) {
      std::string dropped;  // R pushed once: paired first (server/factor_forward.hpp)
      CheckSendable(pstrain::server::ReceiveForwarding(std::move(message), shard, rights, factors,
                                                       now, &dropped),
                    shard, config);
      CheckSendable(shard.Tick(now), shard, config);
      continue;
    }
    if (message.header.has_factors()) {  // sufficient factors: rebuilt, once
      if (shard.placement() == nullptr) {
        shard.CountBadMessage();  // "sufficient factors before the init push"
        continue;
      }
      factors.Prepare(message, *shard.placement(), &incoming, shard.apply_threads());
    } else {
      pstrain::server::TakePayloads(message, &incoming);
    }
    CheckSendable(shard.Handle(incoming, now), shard, config);
    CheckSendable(shard.Tick(now), shard, config);
    if (shard.done()) break;
  }
  const pstrain::ShardStats stats = shard.Stats();
  Require(stats.bad_messages() >= 0 && stats.pushes_applied() >= 0 && stats.version() >= 0,
          "statistics are non-negative");
  return 0;
}
