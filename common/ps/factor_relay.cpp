#include "common/ps/factor_relay.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "common/ps/sufficient_factors.hpp"

namespace pstrain {
namespace {

using std::to_string;

Status Bad(const std::string& why) { return Status::InvalidArgument(why); }

// proto2 keeps an enum value it does not know (a dtype of a later version)
// among the unknown fields, and dtype() then reads FLOAT32: refused.
bool HasUnknownDtype(const pstrain::RelayedFactors& r) {
  const auto& unknown = r.GetReflection()->GetUnknownFields(r);
  for (int i = 0; i < unknown.field_count(); ++i) {
    if (unknown.field(i).number() == pstrain::RelayedFactors::kDtypeFieldNumber) return true;
  }
  return false;
}

// The chunk ids of `ids` exist, are held by `shard` (>= 0) and are not in `seen`.
Status CheckIds(const google::protobuf::RepeatedField<uint32_t>& ids, const char* field,
                const KeyPlacement& placement, int shard, std::vector<char>& seen) {
  for (uint32_t id : ids) {
    if (id >= placement.chunks().size()) {
      return Bad(std::string(field) + ": chunk " + to_string(id) + " does not exist (" +
                 to_string(placement.chunks().size()) + " chunks)");
    }
    if (shard >= 0 && placement.chunk(id).shard != shard) {
      return Bad(std::string(field) + ": chunk " + to_string(id) + " is held by shard " +
                 to_string(placement.chunk(id).shard) + ", not shard " + to_string(shard));
    }
    if (seen[id]) return Bad(std::string(field) + ": chunk " + to_string(id) + " appears twice");
    seen[id] = 1;
  }
  return Status::Ok();
}

}  // namespace

std::vector<uint32_t> ParamChunksOn(const KeyPlacement& placement, int param, int shard) {
  std::vector<uint32_t> ids;
  for (uint32_t id : placement.param_chunks(param)) {
    if (placement.chunk(id).shard == shard) ids.push_back(id);
  }
  return ids;
}

std::vector<int> ParamShards(const KeyPlacement& placement, int param) {
  std::vector<char> holds(static_cast<size_t>(placement.num_shards()), 0);
  for (uint32_t id : placement.param_chunks(param)) holds[placement.chunk(id).shard] = 1;
  std::vector<int> shards;
  for (int s = 0; s < placement.num_shards(); ++s) {
    if (holds[static_cast<size_t>(s)]) shards.push_back(s);
  }
  return shards;
}

int RelayHolder(const KeyPlacement& placement, int param, int worker) {
  const std::vector<int> shards = ParamShards(placement, param);
  return shards[static_cast<size_t>(worker) % shards.size()];
}

int64_t RelayBytes(const KeyPlacement& placement, int param, int64_t cols, int64_t samples,
                   int workers, pstrain::DataType dtype) {
  int64_t bytes = 0;
  for (int s : ParamShards(placement, param)) {
    const int64_t width = SpanRows(placement, ParamChunksOn(placement, param, s), cols).count();
    bytes += FactorFrameBytes(dtype, samples * width);
  }
  bytes += FactorFrameBytes(dtype, samples * cols);  // R, once
  return bytes * workers;
}

Status CheckRelay(const pstrain::Header& h, const std::vector<size_t>& frame_bytes,
                  const KeyPlacement* placement, int shard, int num_workers) {
  const bool pull = h.type() == pstrain::PULL;
  const bool reply = h.type() == pstrain::PULL_REPLY;
  if (!pull && (h.broadcast_size() > 0 || h.history_params_size() > 0)) {
    return Bad("broadcast or history_params in a " + pstrain::MessageType_Name(h.type()) +
               " (only a PULL asks for them)");
  }
  if (!reply && (h.relay_size() > 0 || h.relayed_chunks_size() > 0 || h.has_relay_scale() ||
                 h.history_chunks_size() > 0 || h.has_history_slots())) {
    return Bad("relay or history frames in a " + pstrain::MessageType_Name(h.type()) +
               " (only a PULL_REPLY carries them)");
  }
  if (!pull && !reply && h.rights_ahead_size() > 0) {
    return Bad("rights_ahead in a " + pstrain::MessageType_Name(h.type()) +
               " (only a PULL and a PULL_REPLY carry it)");
  }
  if (pull && placement != nullptr) {
    for (const auto* list : {&h.broadcast(), &h.history_params(), &h.rights_ahead()}) {
      for (uint32_t p : *list) {
        if (p >= static_cast<uint32_t>(placement->num_params())) {
          return Bad("PULL asks for parameter " + to_string(p) + " of " +
                     to_string(placement->num_params()));
        }
      }
    }
  }
  if (!reply) return Status::Ok();
  const size_t history_frames =
      static_cast<size_t>(h.history_slots()) * static_cast<size_t>(h.history_chunks_size());
  if (h.history_chunks_size() > 0 && (h.history_slots() < 1 || h.history_slots() > 4)) {
    return Bad("history: " + to_string(h.history_slots()) + " slots (1 to 4)");
  }
  size_t frame = static_cast<size_t>(h.chunks_size());
  if (frame_bytes.size() < frame + history_frames) {
    return Bad("history: " + to_string(frame_bytes.size()) + " payload frames, " +
               to_string(frame + history_frames) + " needed before the relay");
  }
  if (h.relay_size() > 0 && !(h.relay_scale() > 0.f && std::isfinite(h.relay_scale()))) {
    return Bad("relay: scale " + std::to_string(h.relay_scale()) + " (a finite number > 0)");
  }
  if (placement == nullptr || shard < 0) return Status::Ok();
  std::vector<char> seen(placement->chunks().size(), 0);
  std::vector<char> history_seen(placement->chunks().size(), 0);
  PSTRAIN_RETURN_IF_ERROR(
      CheckIds(h.history_chunks(), "history", *placement, shard, history_seen));
  for (uint32_t k = 0; k < h.history_slots(); ++k) {
    for (uint32_t id : h.history_chunks()) {
      const size_t need = static_cast<size_t>(placement->chunk(id).length) * sizeof(float);
      if (frame_bytes[frame] != need) {
        return Bad("history: slot " + to_string(k) + " of chunk " + to_string(id) + " has " +
                   to_string(frame_bytes[frame]) + " bytes, the chunk needs " + to_string(need));
      }
      ++frame;
    }
  }
  PSTRAIN_RETURN_IF_ERROR(CheckIds(h.relayed_chunks(), "relay", *placement, shard, seen));
  // Per relayed parameter: which workers came, and the chunks it answers.
  std::vector<std::vector<char>> workers(static_cast<size_t>(placement->num_params()));
  for (const pstrain::RelayedFactors& r : h.relay()) {
    const std::string name = "relay: parameter " + to_string(r.param());
    if (r.param() >= static_cast<uint32_t>(placement->num_params())) {
      return Bad(name + " does not exist (" + to_string(placement->num_params()) + " parameters)");
    }
    const int param = static_cast<int>(r.param());
    const int64_t size = ParamSize(*placement, param);
    if (r.samples() < 1 || r.cols() < 1 || size % r.cols() != 0) {
      return Bad(name + ": " + to_string(r.samples()) + " samples, rows of " +
                 to_string(r.cols()) + " for its " + to_string(size) + " values");
    }
    if (num_workers > 0 && r.worker() >= static_cast<uint32_t>(num_workers)) {
      return Bad(name + ": worker " + to_string(r.worker()) + " is not in this job (" +
                 to_string(num_workers) + " workers)");
    }
    std::vector<char>& came = workers[static_cast<size_t>(param)];
    if (came.size() <= r.worker()) came.resize(r.worker() + 1, 0);
    if (came[r.worker()]) return Bad(name + ": worker " + to_string(r.worker()) + " twice");
    came[r.worker()] = 1;
    const std::vector<uint32_t> ids = ParamChunksOn(*placement, param, shard);
    if (ids.empty()) return Bad(name + " has no chunk on this shard");
    const bool ahead = std::find(h.rights_ahead().begin(), h.rights_ahead().end(), r.param()) !=
                       h.rights_ahead().end();
    if (ahead && r.right()) {
      return Bad(name + ": worker " + to_string(r.worker()) +
                 "'s R is relayed, the reply says it went ahead (rights_ahead)");
    }
    if (!ahead &&
        r.right() != (RelayHolder(*placement, param, static_cast<int>(r.worker())) == shard)) {
      return Bad(name + ": worker " + to_string(r.worker()) + "'s R " +
                 (r.right() ? "comes from server " : "is missing from server ") +
                 to_string(shard) + " (its holder is server " +
                 to_string(RelayHolder(*placement, param, static_cast<int>(r.worker()))) + ")");
    }
    if (!IsFactorDtype(r.dtype()) || HasUnknownDtype(r)) {
      return Bad(name + ": worker " + to_string(r.worker()) + "'s factors in " +
                 (HasUnknownDtype(r) ? std::string("an unknown dtype")
                                     : pstrain::DataType_Name(r.dtype())) +
                 " (they travel as FLOAT32, FLOAT16 or BFLOAT16)");
    }
    const std::string type =
        r.dtype() == pstrain::FLOAT32 ? "float32" : pstrain::DataType_Name(r.dtype());
    const int64_t width = SpanRows(*placement, ids, r.cols()).count();
    const size_t left = static_cast<size_t>(FactorFrameBytes(r.dtype(), r.samples() * width));
    const size_t right = static_cast<size_t>(
        FactorFrameBytes(r.dtype(), static_cast<int64_t>(r.samples()) * r.cols()));
    if (frame >= frame_bytes.size() || frame_bytes[frame] != left) {
      return Bad(name + ": worker " + to_string(r.worker()) + "'s L has " +
                 (frame < frame_bytes.size() ? to_string(frame_bytes[frame]) : "no") + " bytes, " +
                 to_string(r.samples()) + " x " + to_string(width) + " " + type + " need " +
                 to_string(left));
    }
    ++frame;
    if (r.right()) {
      if (frame >= frame_bytes.size() || frame_bytes[frame] != right) {
        return Bad(name + ": worker " + to_string(r.worker()) + "'s R has " +
                   (frame < frame_bytes.size() ? to_string(frame_bytes[frame]) : "no") +
                   " bytes, " + to_string(r.samples()) + " x " + to_string(r.cols()) + " " + type +
                   " need " + to_string(right));
      }
      ++frame;
    }
  }
  if (frame != frame_bytes.size()) {
    return Bad("relay: " + to_string(frame_bytes.size()) + " payload frames, the header needs " +
               to_string(frame));
  }
  // Each relayed parameter: every worker, and its chunks here listed as relayed.
  std::vector<char> relayed(placement->chunks().size(), 0);
  for (uint32_t id : h.relayed_chunks()) relayed[id] = 1;
  for (int p = 0; p < placement->num_params(); ++p) {
    const std::vector<char>& came = workers[static_cast<size_t>(p)];
    int count = 0;
    for (char c : came) count += c;
    for (uint32_t id : ParamChunksOn(*placement, p, shard)) {
      if (relayed[id] != (count > 0)) {
        return Bad("relay: chunk " + to_string(id) + " of parameter " + to_string(p) +
                   (count > 0 ? " is not listed as relayed" : " is relayed without factors"));
      }
    }
    if (count > 0 && num_workers > 0 && count != num_workers) {
      return Bad("relay: parameter " + to_string(p) + " has the factors of " + to_string(count) +
                 " workers, the job has " + to_string(num_workers));
    }
  }
  return Status::Ok();
}

Status CheckRight(const pstrain::Header& h, const std::vector<size_t>& frame_bytes,
                  const KeyPlacement* placement, int shard, int num_workers) {
  if (h.type() != pstrain::FACTOR_RIGHT) {
    if (h.has_right()) {
      return Bad("right in a " + pstrain::MessageType_Name(h.type()) +
                 " (only a FACTOR_RIGHT carries it)");
    }
    return Status::Ok();
  }
  const pstrain::FactorRight& r = h.right();
  const std::string name = "FACTOR_RIGHT: parameter " + to_string(r.param());
  if (h.chunks_size() > 0 || h.has_factors() || h.relay_size() > 0) {
    return Bad(name + ": chunks, factors or relay in a FACTOR_RIGHT (it carries one R)");
  }
  if (num_workers > 0 && r.worker() >= static_cast<uint32_t>(num_workers)) {
    return Bad(name + ": worker " + to_string(r.worker()) + " is not in this job (" +
               to_string(num_workers) + " workers)");
  }
  const auto& unknown_fields = r.GetReflection()->GetUnknownFields(r);
  bool unknown = false;  // a dtype of a later version (proto2 reads it as FLOAT32)
  for (int i = 0; i < unknown_fields.field_count(); ++i) {
    unknown |= unknown_fields.field(i).number() == pstrain::FactorRight::kDtypeFieldNumber;
  }
  if (!IsFactorDtype(r.dtype()) || unknown) {
    return Bad(name + ": worker " + to_string(r.worker()) + "'s R in " +
               (unknown ? std::string("an unknown dtype") : pstrain::DataType_Name(r.dtype())) +
               " (it travels as FLOAT32, FLOAT16 or BFLOAT16)");
  }
  if (r.samples() < 1 || r.cols() < 1) {
    return Bad(name + ": " + to_string(r.samples()) + " samples of " + to_string(r.cols()) +
               " values (each at least 1)");
  }
  const size_t need = static_cast<size_t>(
      FactorFrameBytes(r.dtype(), static_cast<int64_t>(r.samples()) * r.cols()));
  if (frame_bytes.size() != 1 || frame_bytes[0] != need) {
    return Bad(name + ": worker " + to_string(r.worker()) + "'s R has " +
               (frame_bytes.empty() ? std::string("no") : to_string(frame_bytes[0])) + " bytes, " +
               to_string(r.samples()) + " x " + to_string(r.cols()) + " " +
               (r.dtype() == pstrain::FLOAT32 ? "float32" : pstrain::DataType_Name(r.dtype())) +
               " need " + to_string(need));
  }
  if (placement == nullptr) return Status::Ok();
  if (r.param() >= static_cast<uint32_t>(placement->num_params())) {
    return Bad(name + " does not exist (" + to_string(placement->num_params()) + " parameters)");
  }
  const int param = static_cast<int>(r.param());
  const int64_t size = ParamSize(*placement, param);
  if (size % r.cols() != 0) {
    return Bad(name + " has " + to_string(size) + " values, not rows of " + to_string(r.cols()));
  }
  if (shard < 0) return Status::Ok();
  if (ParamChunksOn(*placement, param, shard).empty()) {
    return Bad(name + " has no chunk on server " + to_string(shard));
  }
  const int holder = RelayHolder(*placement, param, static_cast<int>(r.worker()));
  if (h.role() == pstrain::SERVER && holder != shard) {
    return Bad(name + ": worker " + to_string(r.worker()) + "'s R comes from server " +
               to_string(shard) + " (its holder is server " + to_string(holder) + ")");
  }
  if (h.role() == pstrain::WORKER && holder == shard) {
    return Bad(name + ": worker " + to_string(r.worker()) + "'s R forwarded to server " +
               to_string(shard) + ", its holder (which has it from the push)");
  }
  return Status::Ok();
}

}  // namespace pstrain
