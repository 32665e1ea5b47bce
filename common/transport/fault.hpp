// A Channel wrapper for tests that damages outgoing messages: drops,
// duplicates, delays or corrupts them with given probabilities, or fails the
// first sends with a given status code (a peer gone, a full queue). The choices
// come from a seeded generator of its own, so a given seed and sequence of
// sends always gives the same faults. Receiving is passed through untouched.
#pragma once

#include <cstdint>
#include <memory>

#include "common/transport/channel.hpp"

namespace pstrain::transport {

// Probabilities per sent message, drawn independently, in this order:
struct FaultSpec {
  double drop = 0;              // not sent at all (nothing else applies)
  double duplicate = 0;         // sent twice, back to back
  double corrupt_header = 0;    // one byte of frame 0 inverted (it may still parse, wrongly)
  double corrupt_payload = 0;   // one byte of one non-empty payload inverted
  double truncate_payload = 0;  // one non-empty payload cut to a shorter byte length
  int delay_ms = 0;             // every send waits this long first (order is kept)
  uint64_t seed = 1;
  // The first `fail_sends` sends return a `fail_code` error and send nothing
  // (before any of the above is drawn).
  int fail_sends = 0;
  StatusCode fail_code = StatusCode::kUnavailable;
};

// What a FaultChannel has done so far.
struct FaultCounts {
  int64_t messages = 0;  // Send/SendFrames calls
  int64_t dropped = 0, duplicated = 0, header_corrupted = 0, payload_corrupted = 0, truncated = 0;
  int64_t failed = 0;  // sends that returned the injected error
};

class FaultChannel : public Channel {
 public:
  FaultChannel(std::unique_ptr<Channel> inner, const FaultSpec& faults);

  // Applies the faults, then sends through the inner channel. Damaged frames
  // are copies: the caller's payload memory is never written.
  Status SendFrames(const std::string& peer, std::vector<Frame> frames) override;
  Result<std::optional<InMessage>> Receive(std::chrono::milliseconds timeout) override {
    return inner_->Receive(timeout);
  }
  const std::string& endpoint() const override { return inner_->endpoint(); }

  const FaultCounts& counts() const { return counts_; }

 private:
  uint64_t Next();                                                            // splitmix64
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }  // [0, 1)
  bool Happens(double p) { return Uniform() < p; }
  // Index of a non-empty payload frame (frames[1..]) chosen by `random`, or 0 if none.
  static size_t PickPayload(const std::vector<Frame>& frames, uint64_t random);
  void* poll_handle() override { return inner_->poll_handle(); }

  std::unique_ptr<Channel> inner_;
  FaultSpec faults_;
  uint64_t state_;
  FaultCounts counts_;
};

std::unique_ptr<Channel> WithFaults(std::unique_ptr<Channel> inner, const FaultSpec& faults);

}  // namespace pstrain::transport
