#include "common/transport/fault.hpp"

#include <cstring>
#include <string>
#include <thread>
#include <utility>

namespace pstrain::transport {
namespace {

// A copy of `frame` with its first `size` bytes (size <= frame.size()).
Frame CopyPrefix(const Frame& frame, size_t size) {
  Frame copy(size);
  if (size > 0) std::memcpy(copy.data(), frame.data(), size);
  return copy;
}

}  // namespace

FaultChannel::FaultChannel(std::unique_ptr<Channel> inner, const FaultSpec& faults)
    : inner_(std::move(inner)), faults_(faults), state_(faults.seed) {
  PSTRAIN_CHECK(inner_ != nullptr);
}

uint64_t FaultChannel::Next() {
  uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

size_t FaultChannel::PickPayload(const std::vector<Frame>& frames, uint64_t random) {
  std::vector<size_t> candidates;
  for (size_t i = 1; i < frames.size(); ++i) {
    if (frames[i].size() > 0) candidates.push_back(i);
  }
  return candidates.empty() ? 0 : candidates[random % candidates.size()];
}

Status FaultChannel::SendFrames(const std::string& peer, std::vector<Frame> frames) {
  PSTRAIN_CHECK(!frames.empty());
  ++counts_.messages;
  if (counts_.failed < faults_.fail_sends) {
    ++counts_.failed;
    return Status::FromCode(faults_.fail_code, endpoint() + ": send: injected failure " +
                                                   std::to_string(counts_.failed) + " of " +
                                                   std::to_string(faults_.fail_sends));
  }
  // Every decision is drawn for every message so that one fault's outcome
  // never shifts the draws of the next messages.
  const bool drop = Happens(faults_.drop);
  const bool duplicate = Happens(faults_.duplicate);
  const bool corrupt_header = Happens(faults_.corrupt_header);
  const bool corrupt_payload = Happens(faults_.corrupt_payload);
  const bool truncate = Happens(faults_.truncate_payload);
  const uint64_t header_pos = Next(), payload_pick = Next(), payload_pos = Next(),
                 truncate_pick = Next(), truncate_len = Next();
  if (faults_.delay_ms > 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(faults_.delay_ms));
  if (drop) {
    ++counts_.dropped;
    return Status::Ok();
  }
  if (corrupt_header && frames[0].size() > 0) {
    Frame copy = CopyPrefix(frames[0], frames[0].size());
    static_cast<unsigned char*>(copy.data())[header_pos % copy.size()] ^= 0xFF;
    frames[0] = std::move(copy);
    ++counts_.header_corrupted;
  }
  if (size_t i = corrupt_payload ? PickPayload(frames, payload_pick) : 0; i > 0) {
    Frame copy = CopyPrefix(frames[i], frames[i].size());
    static_cast<unsigned char*>(copy.data())[payload_pos % copy.size()] ^= 0xFF;
    frames[i] = std::move(copy);
    ++counts_.payload_corrupted;
  }
  if (size_t i = truncate ? PickPayload(frames, truncate_pick) : 0; i > 0) {
    frames[i] = CopyPrefix(frames[i], truncate_len % frames[i].size());
    ++counts_.truncated;
  }
  if (duplicate) {
    std::vector<Frame> again;
    again.reserve(frames.size());
    for (Frame& frame : frames) again.push_back(frame.Share());
    PSTRAIN_RETURN_IF_ERROR(inner_->SendFrames(peer, std::move(again)));
    ++counts_.duplicated;
  }
  return inner_->SendFrames(peer, std::move(frames));
}

std::unique_ptr<Channel> WithFaults(std::unique_ptr<Channel> inner, const FaultSpec& faults) {
  return std::make_unique<FaultChannel>(std::move(inner), faults);
}

}  // namespace pstrain::transport
