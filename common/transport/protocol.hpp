// The protocol's vocabulary: which role sends each message kind to which,
// the fields each kind needs, the headers' builders and the readers of the
// answers a worker gets. docs/wire-protocol.md describes every exchange;
// proto/pstrain.proto is the schema.
//
//   kind          sent by -> to                 needs (besides type, role, sender)
//   HELLO         worker -> server              world_size (pull_dtype: 16-bit pulls;
//                                               gpu_ipc_offer: GPU IPC pushes, gpu_path.hpp)
//   HELLO_ACK     server -> worker              clock, version, text = mode (pull_dtype echoed;
//                                               gpu_ipc_answer to an offer)
//   INIT_PUSH     worker 0 -> server            params, chunks (every chunk of the shard)
//   INIT_ACK      server -> worker 0            version
//   PULL          worker -> server              clock
//   PULL_REPLY    server -> worker              clock, version, reply_chunks_total
//   PUSH          worker -> server              clock, chunks (ipc_offsets: GPU IPC, no payloads)
//   PUSH_ACK      server -> worker              clock
//   SHUTDOWN      worker, control -> server; the server's answer back
//   HEARTBEAT     worker -> server, when it sent nothing else for kHeartbeatInterval
//   ERROR         server -> worker, control     text
//   NORM_PARTIAL  server -> server 0            clock, sum_squares
//   NORM_TOTAL    server 0 -> servers           clock, sum_squares
//   STATS         worker, control -> server; the answer carries stats
//   GATE          worker, control -> server     clock (the new step gate)
//   GATE_ACK      server -> worker, control     clock (the slowest worker's), version
//   FACTOR_RIGHT  server -> worker (ahead of a step), worker -> server (forwarded)
//                                               clock, right; one payload frame (R)
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/ps/consistency_mode.hpp"
#include "common/status.hpp"
#include "common/transport/message.hpp"
#include "proto/pstrain.pb.h"

namespace pstrain::transport {

// Liveness (docs/wire-protocol.md, "Liveness"): a worker sends HEARTBEAT to a
// server it sent nothing else for this long; a server warns about a worker it
// has not heard from for kSilenceWarning.
inline constexpr std::chrono::milliseconds kHeartbeatInterval{1000};
inline constexpr std::chrono::milliseconds kSilenceWarning{10000};

// A sender's choice, not a rule of the protocol: a PUSH or a PULL_REPLY
// carries chunks of at most this many payload bytes in all (but always at
// least one chunk); the rest go in further messages of the same kind.
// ZeroMQ hands a multipart message over only when its last frame is in, so
// the receiver applies (server) or copies (worker) part k while part k+1
// travels instead of waiting for a whole shard's worth.
inline constexpr size_t kMessagePartBytes = size_t{1} << 20;

// Cuts a list of chunks (their payload bytes, in order) into runs of
// consecutive chunks of at most `part_bytes` in all, each run at least one
// chunk. Returns the index where each run starts (empty for no chunks).
std::vector<size_t> PartStarts(const std::vector<size_t>& chunk_bytes, size_t part_bytes);

// `message` as consecutive parts of at most `part_bytes` of payload each
// (PartStarts over its payloads' bytes()): each part has the header's fields,
// the run of chunks it carries and their payloads, in order. A message of at
// most one part comes back whole. Both PUSH (PsClient) and PULL_REPLY
// (ShardLoop) are split by it. REQUIRES: one payload per header chunk.
std::vector<OutMessage> SplitMessage(OutMessage message, size_t part_bytes = kMessagePartBytes);

// Ok when a process of role `receiver` accepts the kind of `header` from the
// sender's role and the header has the fields the kind needs. Errors: "a
// server does not accept PULL_REPLY", "a server accepts PUSH only from a
// worker", "HELLO has no world_size".
Status CheckKind(const Header& header, Role receiver);

// Who sends a header: its role, rank within the role and the job's key.
struct Origin {
  Role role = WORKER;
  int rank = 0;
  uint64_t job_key = 0;  // 0: none (not written)
};

Header NewHeader(const Origin& from, MessageType type);
// An answer to `request` of kind `type`, with the request's clock (if any).
Header ReplyHeader(const Origin& from, const Header& request, MessageType type);
void AddChunk(Header& header, uint32_t id, uint64_t length);

// `pull_dtype` other than FLOAT32: asks for 16-bit pull replies (HELLO's pull_dtype).
Header HelloHeader(const Origin& worker, int world_size, DataType pull_dtype = FLOAT32);
Header PullHeader(const Origin& worker, int64_t clock);
// `sum_squares` < 0: not sent (only clipping in ssp/asp needs it).
Header PushHeader(const Origin& worker, int64_t clock, double sum_squares);
// `clock`: the iterations the worker has completely pushed to this shard. The
// HELLO's pull_dtype, if any, is echoed: the shard serves that worker's pulls in it.
Header HelloAckHeader(const Origin& server, const Header& hello, int64_t clock, int64_t version,
                      ConsistencyMode mode, int world_size);
// GATE: open the step gate of a shard started with --step-gate to `gate`.
Header GateHeader(const Origin& driver, int64_t gate, bool checkpoint = false);
Header ErrorHeader(const Origin& server, const Header& request, const std::string& why);
// NORM_PARTIAL (a shard's part of step `clock`'s squared gradient norm, to
// server 0) or NORM_TOTAL (server 0's sum of all parts, to the others).
// REQUIRES: type is NORM_PARTIAL or NORM_TOTAL.
Header NormHeader(const Origin& server, MessageType type, int64_t clock, double sum_squares);

// What HELLO_ACK tells a worker that asked for `pull_dtype` pulls. Errors:
// the text is not a mode (`HELLO_ACK: mode "x" is not one of bsp, ssp, asp`);
// FailedPrecondition when the ack does not grant `pull_dtype` (a server from
// before 16-bit pulls leaves pull_dtype out: `HELLO_ACK: this worker asked for
// FLOAT16 pulls and the server does not send them (...)`).
struct HelloAck {
  int64_t clock = 0;
  int64_t version = 0;
  ConsistencyMode mode = ConsistencyMode::kBsp;
};
Result<HelloAck> ReadHelloAck(const Header& header, DataType pull_dtype = FLOAT32);

}  // namespace pstrain::transport
