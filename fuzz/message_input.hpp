// The "message" fuzz target's input format: a set-up byte, then messages as
// length-prefixed frames (fuzz_message.cpp describes it). MessageInput reads
// it; AppendMessage writes it (for the seed corpus made from real headers).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/optim/solver_hyper.hpp"
#include "server/shard_config.hpp"

namespace pstrain::fuzz {

inline constexpr size_t kMaxFrames = 8;

class MessageInput {
 public:
  MessageInput(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  uint8_t setup() { return size_ > 0 ? data_[pos_++] : 0; }
  // The next message's frames; false at the end of the input.
  bool Next(std::vector<std::string>* frames) {
    frames->clear();
    if (pos_ >= size_) return false;
    const size_t count = data_[pos_++] % (kMaxFrames + 1);
    for (size_t f = 0; f < count && pos_ < size_; ++f) {
      size_t length = data_[pos_];
      if (pos_ + 1 < size_) length |= static_cast<size_t>(data_[pos_ + 1]) << 8;
      pos_ += 2;
      if (pos_ > size_) pos_ = size_;
      if (length > size_ - pos_) length = size_ - pos_;
      frames->emplace_back(reinterpret_cast<const char*>(data_ + pos_), length);
      pos_ += length;
    }
    return true;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

// REQUIRES: frames.size() <= kMaxFrames, every frame < 64 KiB.
inline void AppendMessage(const std::vector<std::string>& frames, std::string* out) {
  out->push_back(static_cast<char>(frames.size()));
  for (const std::string& f : frames) {
    out->push_back(static_cast<char>(f.size() & 0xff));
    out->push_back(static_cast<char>(f.size() >> 8));
    *out += f;
  }
}

// The shard a "message" input talks to (bits of its first byte).
inline server::ShardConfig SetupConfig(uint8_t setup) {
  server::ShardConfig c;
  c.mode = setup % 3 == 0   ? ConsistencyMode::kBsp
           : setup % 3 == 1 ? ConsistencyMode::kSsp
                            : ConsistencyMode::kAsp;
  c.staleness = c.mode == ConsistencyMode::kSsp ? 1 : 0;
  c.num_workers = (setup & 4) ? 2 : 1;
  c.num_shards = (setup & 8) ? 2 : 1;
  c.shard = (setup & 8) && (setup & 16) ? 1 : 0;
  c.hyper.base_lr = 0.1f;
  c.hyper.momentum = 0.9f;
  if (setup & 32) c.hyper.clip_gradients = 1.0f;
  c.step_gate = (setup & 64) != 0;
  // Bit 7: host aggregation (bsp only): each pusher stands for more workers.
  if ((setup & 128) && c.mode == ConsistencyMode::kBsp) c.averaged_workers = c.num_workers + 1;
  c.chunk_bytes = 16;
  c.job_key = 77;
  return c;
}

}  // namespace pstrain::fuzz
