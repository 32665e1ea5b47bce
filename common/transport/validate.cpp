#include "common/transport/validate.hpp"

#include <string>
#include <unordered_set>
#include <vector>

#include "common/ps/factor_relay.hpp"
#include "common/ps/sufficient_factors.hpp"
#include "common/transport/curve.hpp"
#include "common/transport/gpu_path.hpp"
#include "common/transport/gradient_codec.hpp"
#include "common/transport/protocol.hpp"

namespace pstrain::transport {
namespace {

using std::to_string;

constexpr int kDtypeField = 7;  // Header.dtype

// proto2 keeps an enum value it does not know among the unknown fields, so a
// dtype we cannot read shows up there and not in header.dtype().
bool HasUnknownDtype(const Header& header) {
  const auto& unknown = header.GetReflection()->GetUnknownFields(header);
  for (int i = 0; i < unknown.field_count(); ++i) {
    if (unknown.field(i).number() == kDtypeField) return true;
  }
  return false;
}

Status CheckSender(const Header& h, const ValidationRules& rules) {
  if (h.role() == WORKER && rules.num_workers > 0 &&
      (h.sender() < 0 || h.sender() >= rules.num_workers)) {
    return Status::InvalidArgument("worker " + to_string(h.sender()) + " is not in this job (" +
                                   to_string(rules.num_workers) + " workers)");
  }
  if (h.role() == SERVER && rules.num_servers > 0 &&
      (h.sender() < 0 || h.sender() >= rules.num_servers)) {
    return Status::InvalidArgument("server " + to_string(h.sender()) + " is not in this job (" +
                                   to_string(rules.num_servers) + " servers)");
  }
  if (h.type() == HELLO && h.has_world_size() && rules.num_workers > 0 &&
      h.world_size() != rules.num_workers) {
    return Status::InvalidArgument("world size " + to_string(h.world_size()) +
                                   " does not match this job (" + to_string(rules.num_workers) +
                                   " workers)");
  }
  return Status::Ok();
}

// Frame count, the chunk list and each payload's byte size.
Status CheckPayloads(const InMessage& message, const ValidationRules& rules) {
  const Header& h = message.header;
  if (h.ipc_offsets_size() > 0) {  // GPU IPC: the values are in the worker's region
    PSTRAIN_RETURN_IF_ERROR(CheckIpcPushShape(h, message.frames.size()));
  } else if (h.has_factors()) {  // two frames for all chunks (common/ps/sufficient_factors.hpp)
    if (h.type() != PUSH) {
      return Status::InvalidArgument("factors in a " + MessageType_Name(h.type()) +
                                     " (only a PUSH carries them)");
    }
    const size_t frames = h.factors().right_forwarded() ? 1 : 2;
    if (message.frames.size() != frames) {
      return Status::InvalidArgument(
          "factors: " + to_string(message.frames.size()) + " payload frames follow, a PUSH with " +
          (frames == 1 ? "factors and right_forwarded has 1" : "factors has 2"));
    }
  } else if (h.has_right()) {  // FACTOR_RIGHT: R (common/ps/factor_relay.hpp)
    if (message.frames.size() != 1) {
      return Status::InvalidArgument(to_string(message.frames.size()) +
                                     " payload frames follow, a FACTOR_RIGHT has 1");
    }
  } else if (PayloadFrames(h) != message.frames.size()) {
    if (PayloadFrames(h) == static_cast<size_t>(h.chunks_size())) {
      return Status::InvalidArgument("header lists " + to_string(h.chunks_size()) +
                                     " chunks but " + to_string(message.frames.size()) +
                                     " payload frames follow");
    }
    return Status::InvalidArgument("header lists " + to_string(h.chunks_size()) + " chunks, " +
                                   to_string(h.history_chunks_size()) + " history chunks and " +
                                   to_string(h.relay_size()) + " relayed factors, but " +
                                   to_string(message.frames.size()) + " payload frames follow");
  }
  {
    std::vector<size_t> frame_bytes;
    for (const auto& f : message.frames) frame_bytes.push_back(f.size());
    PSTRAIN_RETURN_IF_ERROR(
        CheckRelay(h, frame_bytes, rules.placement, rules.shard, rules.num_workers));
    PSTRAIN_RETURN_IF_ERROR(
        CheckRight(h, frame_bytes, rules.placement, rules.shard, rules.num_workers));
  }
  if (rules.placement != nullptr) {
    PSTRAIN_RETURN_IF_ERROR(CheckChunkList(h, *rules.placement, rules.shard, false));
  } else {
    std::unordered_set<uint32_t> seen;
    for (const ChunkRef& ref : h.chunks()) {
      if (!seen.insert(ref.id()).second) {
        return Status::InvalidArgument("chunk " + to_string(ref.id()) + " appears twice");
      }
    }
  }
  // An IPC push's slices are checked against the worker's region where it
  // is known (server/gpu_ipc_reader.hpp).
  if (h.ipc_offsets_size() > 0) return Status::Ok();
  if (h.has_factors()) {
    return CheckFactors(h, message.frames[0].size(),
                        message.frames.size() > 1 ? message.frames[1].size() : 0, rules.placement);
  }
  for (int i = 0; i < h.chunks_size(); ++i) {
    const uint64_t needed = h.chunks(i).length();  // the chunk's, when checked above
    const size_t bytes = message.frames[static_cast<size_t>(i)].size();
    if (h.dtype() != FLOAT32) {
      Status s =
          bytes % 4 == 0
              ? CheckEncoded(h.dtype(), message.payload(static_cast<size_t>(i)), bytes, needed)
              : Status::InvalidArgument("payload of " + to_string(bytes) + " bytes");
      if (!s.ok())
        return Status::InvalidArgument("chunk " + to_string(h.chunks(i).id()) + ": " + s.message());
      continue;
    }
    if (needed > UINT64_MAX / sizeof(float) || bytes != needed * sizeof(float)) {
      return Status::InvalidArgument("chunk " + to_string(h.chunks(i).id()) + ": payload has " +
                                     to_string(bytes) + " bytes, the chunk needs " +
                                     to_string(needed * sizeof(float)));
    }
  }
  if (h.type() == PULL_REPLY && rules.placement != nullptr && rules.shard >= 0 &&
      h.reply_chunks_total() != rules.placement->shard_chunks(rules.shard).size()) {
    return Status::InvalidArgument("PULL_REPLY says " + to_string(h.reply_chunks_total()) +
                                   " chunks in all, shard " + to_string(rules.shard) + " holds " +
                                   to_string(rules.placement->shard_chunks(rules.shard).size()));
  }
  return Status::Ok();
}

}  // namespace

Status CheckChunkList(const Header& h, const KeyPlacement& placement, int shard, bool complete) {
  std::vector<bool> seen(placement.chunks().size());
  for (const ChunkRef& ref : h.chunks()) {
    const std::string name = "chunk " + to_string(ref.id());
    if (ref.id() >= placement.chunks().size()) {
      return Status::InvalidArgument(name + " does not exist (" +
                                     to_string(placement.chunks().size()) + " chunks)");
    }
    const Chunk& chunk = placement.chunk(ref.id());
    if (shard >= 0 && chunk.shard != shard) {
      return Status::InvalidArgument(name + " is held by shard " + to_string(chunk.shard) +
                                     ", not shard " + to_string(shard));
    }
    if (seen[ref.id()]) return Status::InvalidArgument(name + " appears twice");
    seen[ref.id()] = true;
    if (ref.length() != static_cast<uint64_t>(chunk.length)) {
      return Status::InvalidArgument(name + ": header says " + to_string(ref.length()) +
                                     " values, the chunk has " + to_string(chunk.length));
    }
  }
  if (complete && shard >= 0 &&
      static_cast<size_t>(h.chunks_size()) != placement.shard_chunks(shard).size()) {
    return Status::InvalidArgument("it carries " + to_string(h.chunks_size()) + " of shard " +
                                   to_string(shard) + "'s " +
                                   to_string(placement.shard_chunks(shard).size()) + " chunks");
  }
  return Status::Ok();
}

Status Validate(const InMessage& message, const ValidationRules& rules) {
  const Header& h = message.header;
  if (rules.job_key != 0 && h.job_key() != rules.job_key)
    return Status::InvalidArgument("job key mismatch");
  if (rules.authenticated) {
    const std::string claimed = PeerName(h.role(), h.sender());
    if (message.user_id != claimed) {
      return Status::InvalidArgument(
          "sent as " + claimed + " by " +
          (message.user_id.empty() ? "an unauthenticated peer" : "the key of " + message.user_id));
    }
  }
  if (rules.receiver == SERVER && (h.type() == SHUTDOWN || h.type() == STATS || h.type() == GATE)) {
    const std::string kind = MessageType_Name(h.type());
    if (rules.authenticated && message.user_id != PeerName(CONTROL, 0) &&
        message.user_id != PeerName(WORKER, 0)) {
      return Status::InvalidArgument(kind +
                                     " is accepted only from the orchestrator's key or "
                                     "worker 0's");
    }
    if (!rules.authenticated && rules.job_key == 0) {
      return Status::InvalidArgument(kind +
                                     " from an unauthenticated peer (this server has "
                                     "neither CURVE keys nor a job key)");
    }
  }
  if (HasUnknownDtype(h)) return Status::InvalidArgument("unsupported dtype");
  if (h.dtype() != FLOAT32 && h.type() != PUSH &&
      !(h.type() == PULL_REPLY && IsHalfWidth(h.dtype()))) {
    return Status::InvalidArgument(
        "dtype " + DataType_Name(h.dtype()) + " in a " + MessageType_Name(h.type()) +
        " (only a PUSH may be compressed, and a PULL_REPLY be FLOAT16 or BFLOAT16)");
  }
  if (rules.receiver) PSTRAIN_RETURN_IF_ERROR(CheckKind(h, *rules.receiver));
  PSTRAIN_RETURN_IF_ERROR(CheckSender(h, rules));
  PSTRAIN_RETURN_IF_ERROR(CheckPayloads(message, rules));
  if (h.type() == PUSH || h.type() == PULL) {
    if (!h.has_clock())
      return Status::InvalidArgument(MessageType_Name(h.type()) + " has no clock");
    if (h.clock() < rules.min_clock || h.clock() > rules.max_clock) {
      return Status::InvalidArgument("clock " + to_string(h.clock()) + " is outside [" +
                                     to_string(rules.min_clock) + ", " +
                                     to_string(rules.max_clock) + "]");
    }
  }
  if (h.has_gate_checkpoint() && h.type() != GATE) {
    return Status::InvalidArgument("gate_checkpoint in a " + MessageType_Name(h.type()));
  }
  if (h.has_pull_dtype()) {
    if (h.type() != HELLO && h.type() != HELLO_ACK)
      return Status::InvalidArgument("pull_dtype in a " + MessageType_Name(h.type()));
    if (h.pull_dtype() != FLOAT32 && !IsHalfWidth(h.pull_dtype())) {
      return Status::InvalidArgument("pull_dtype " + DataType_Name(h.pull_dtype()) +
                                     " (a pull is FLOAT32, FLOAT16 or BFLOAT16)");
    }
  }
  if (h.has_gpu_ipc_offer() && h.type() != HELLO)
    return Status::InvalidArgument("gpu_ipc_offer in a " + MessageType_Name(h.type()));
  if (h.has_gpu_ipc_answer() && h.type() != HELLO_ACK)
    return Status::InvalidArgument("gpu_ipc_answer in a " + MessageType_Name(h.type()));
  if (h.has_after_push()) {
    if (h.type() != PULL)
      return Status::InvalidArgument("after_push in a " + MessageType_Name(h.type()));
    if (h.after_push() < 0 || h.after_push() >= h.clock()) {
      return Status::InvalidArgument("PULL for iteration " + to_string(h.clock()) +
                                     " waits for push " + to_string(h.after_push()) +
                                     " (must be in [0, " + to_string(h.clock()) + "))");
    }
  }
  return Status::Ok();
}

}  // namespace pstrain::transport
