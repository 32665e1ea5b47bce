#include "common/transport/protocol.hpp"

namespace pstrain::transport {
namespace {

const char* RoleName(Role role) {
  switch (role) {
    case WORKER:
      return "worker";
    case SERVER:
      return "server";
    case CONTROL:
      return "control tool";
  }
  return "?";
}

// Roles as bits, to name several at once.
constexpr unsigned Bit(Role role) { return 1u << static_cast<unsigned>(role); }
constexpr unsigned kWorker = Bit(WORKER), kServer = Bit(SERVER), kControl = Bit(CONTROL);

// The roles that may send `type` to `receiver`; 0: `receiver` does not accept
// the kind.
unsigned Senders(MessageType type, Role receiver) {
  if (receiver == SERVER) {
    switch (type) {
      case HELLO:
      case INIT_PUSH:
      case PUSH:
      case HEARTBEAT:
      case FACTOR_RIGHT:  // forwarded to a shard whose push came without R
        return kWorker;
      case PULL:  // a control tool's pull reads the current weights (ShardState::OnControlPull)
        return kWorker | kControl;
      case NORM_PARTIAL:
      case NORM_TOTAL:
        return kServer;
      case STATS:
      case SHUTDOWN:
      case GATE:
        return kWorker | kControl;
      default:
        return 0;
    }
  }
  switch (type) {  // a worker or a control tool: the answers of servers
    case HELLO_ACK:
    case INIT_ACK:
    case PULL_REPLY:
    case PUSH_ACK:
    case ERROR:
    case STATS:
    case SHUTDOWN:
    case GATE_ACK:
    case FACTOR_RIGHT:  // from the holder shard, ahead of the step
      return kServer;
    default:
      return 0;
  }
}

}  // namespace

Status CheckKind(const Header& h, Role receiver) {
  const std::string kind = MessageType_Name(h.type());
  const unsigned senders = Senders(h.type(), receiver);
  if (senders == 0) {
    return Status::InvalidArgument(std::string("a ") + RoleName(receiver) + " does not accept " +
                                   kind);
  }
  if ((senders & Bit(h.role())) == 0) {
    std::string who;
    for (Role r : {WORKER, SERVER, CONTROL}) {
      if (senders & Bit(r)) who += std::string(who.empty() ? "" : " or a ") + RoleName(r);
    }
    return Status::InvalidArgument(std::string("a ") + RoleName(receiver) + " accepts " + kind +
                                   " only from a " + who);
  }
  auto needs = [&](bool has, const char* field) {
    return has ? Status::Ok() : Status::InvalidArgument(kind + " has no " + field);
  };
  switch (h.type()) {
    case HELLO:
      return needs(h.has_world_size(), "world_size");
    case HELLO_ACK:
      PSTRAIN_RETURN_IF_ERROR(needs(h.has_clock(), "clock"));
      return needs(h.has_version(), "version");
    case PULL_REPLY:
      PSTRAIN_RETURN_IF_ERROR(needs(h.has_clock(), "clock"));
      PSTRAIN_RETURN_IF_ERROR(needs(h.has_version(), "version"));
      return needs(h.has_reply_chunks_total(), "reply_chunks_total");
    case NORM_PARTIAL:
    case NORM_TOTAL:
      PSTRAIN_RETURN_IF_ERROR(needs(h.has_clock(), "clock"));
      return needs(h.has_sum_squares(), "sum_squares");
    case GATE:
      return needs(h.has_clock(), "clock");
    case FACTOR_RIGHT:
      PSTRAIN_RETURN_IF_ERROR(needs(h.has_clock(), "clock"));
      return needs(h.has_right(), "right");
    case GATE_ACK:
      PSTRAIN_RETURN_IF_ERROR(needs(h.has_clock(), "clock"));
      return needs(h.has_version(), "version");
    default:
      return Status::Ok();  // PUSH and PULL clocks: Validate checks them with their range
  }
}

Header NewHeader(const Origin& from, MessageType type) {
  Header h;
  h.set_type(type);
  h.set_role(from.role);
  h.set_sender(from.rank);
  if (from.job_key != 0) h.set_job_key(from.job_key);
  return h;
}

Header ReplyHeader(const Origin& from, const Header& request, MessageType type) {
  Header h = NewHeader(from, type);
  if (request.has_clock()) h.set_clock(request.clock());
  return h;
}

void AddChunk(Header& header, uint32_t id, uint64_t length) {
  ChunkRef* ref = header.add_chunks();
  ref->set_id(id);
  ref->set_length(length);
}

Header HelloHeader(const Origin& worker, int world_size, DataType pull_dtype) {
  Header h = NewHeader(worker, HELLO);
  h.set_world_size(world_size);
  if (pull_dtype != FLOAT32) h.set_pull_dtype(pull_dtype);
  return h;
}

Header PullHeader(const Origin& worker, int64_t clock) {
  Header h = NewHeader(worker, PULL);
  h.set_clock(clock);
  return h;
}

Header PushHeader(const Origin& worker, int64_t clock, double sum_squares) {
  Header h = NewHeader(worker, PUSH);
  h.set_clock(clock);
  if (sum_squares >= 0) h.set_sum_squares(sum_squares);
  return h;
}

Header HelloAckHeader(const Origin& server, const Header& hello, int64_t clock, int64_t version,
                      ConsistencyMode mode, int world_size) {
  Header h = ReplyHeader(server, hello, HELLO_ACK);
  h.set_clock(clock);
  h.set_version(version);
  h.set_world_size(world_size);
  h.set_text(ModeName(mode));
  if (hello.has_pull_dtype()) h.set_pull_dtype(hello.pull_dtype());
  return h;
}

Header GateHeader(const Origin& driver, int64_t gate, bool checkpoint) {
  Header h = NewHeader(driver, GATE);
  h.set_clock(gate);
  if (checkpoint) h.set_gate_checkpoint(true);
  return h;
}

Header ErrorHeader(const Origin& server, const Header& request, const std::string& why) {
  Header h = ReplyHeader(server, request, ERROR);
  h.set_text(why);
  return h;
}

Header NormHeader(const Origin& server, MessageType type, int64_t clock, double sum_squares) {
  PSTRAIN_CHECK(type == NORM_PARTIAL || type == NORM_TOTAL);
  Header h = NewHeader(server, type);
  h.set_clock(clock);
  h.set_sum_squares(sum_squares);
  return h;
}

Result<HelloAck> ReadHelloAck(const Header& header, DataType pull_dtype) {
  auto mode = ParseConsistencyMode(header.text());
  if (!mode.ok()) return mode.status().WithContext("HELLO_ACK");
  if (pull_dtype != FLOAT32 && !header.has_pull_dtype()) {
    return Status::FailedPrecondition(
        "HELLO_ACK: this worker asked for " + DataType_Name(pull_dtype) +
        " pulls and the server does not send them (a ps-server from before 16-bit pulls); "
        "run the same version everywhere, or pull in FLOAT32 (transport.pull_compression: none)");
  }
  const DataType served = header.has_pull_dtype() ? header.pull_dtype() : FLOAT32;
  if (served != pull_dtype) {
    return Status::FailedPrecondition("HELLO_ACK: the server will send " + DataType_Name(served) +
                                      " pulls, this worker asked for " + DataType_Name(pull_dtype));
  }
  return HelloAck{header.clock(), header.version(), mode.value()};
}

std::vector<size_t> PartStarts(const std::vector<size_t>& chunk_bytes, size_t part_bytes) {
  std::vector<size_t> starts;
  size_t in_part = 0;
  for (size_t i = 0; i < chunk_bytes.size(); ++i) {
    if (starts.empty() || in_part + chunk_bytes[i] > part_bytes) {
      starts.push_back(i);
      in_part = 0;
    }
    in_part += chunk_bytes[i];
  }
  return starts;
}

std::vector<OutMessage> SplitMessage(OutMessage message, size_t part_bytes) {
  std::vector<size_t> bytes;
  for (const Payload& p : message.payloads) bytes.push_back(p.bytes());
  const std::vector<size_t> starts = PartStarts(bytes, part_bytes);
  std::vector<OutMessage> parts;
  // Frames other than one per chunk (factors, history, a relay) go whole.
  if (starts.size() < 2 ||
      PayloadFrames(message.header) != static_cast<size_t>(message.header.chunks_size())) {
    parts.push_back(std::move(message));
    return parts;
  }
  for (size_t part = 0; part < starts.size(); ++part) {
    const size_t end = part + 1 < starts.size() ? starts[part + 1] : message.payloads.size();
    OutMessage piece{message.header, {}};
    piece.header.clear_chunks();
    for (size_t i = starts[part]; i < end; ++i) {
      *piece.header.add_chunks() = message.header.chunks(static_cast<int>(i));
      piece.payloads.push_back(std::move(message.payloads[i]));
    }
    parts.push_back(std::move(piece));
  }
  return parts;
}

}  // namespace pstrain::transport
