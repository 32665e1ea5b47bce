// PullReplyOrder: a shard's pull replies in forward order within a bounded
// window (P3 / ByteScheduler style priority; docs/architecture.md, "Pulls
// in forward order").
//
// ShardState answers a bsp pull chunk by chunk as each chunk's step is
// applied, i.e. in push order (backward order): the first layer's weights,
// which the worker's forward needs first, become ready last. Sent at once,
// they would queue in ZeroMQ behind every late layer's bytes. Here each
// PULL_REPLY is cut into its chunks and held per peer; a peer is sent more
// only while the bytes ZeroMQ still holds for it (payloads it has not let go
// of: over tcp, not yet written to the kernel; over inproc, not yet
// released by the receiver) are below `window_bytes`, always the queued
// chunks of lowest id first. Chunk ids run in parameter order
// (common/ps/key_placement.hpp) = the net's learnable order = forward order,
// so a chunk that becomes ready later but comes earlier in forward order
// overtakes the late-layer chunks still queued here. One message carries
// consecutive (lowest-id) chunks of one reply, at most part_bytes (a chunk
// larger goes alone); a peer with nothing in flight is always sent one.
// Replies are otherwise unchanged (same header fields per part), so the
// worker's result is the same in any order.
// Threads: one (the shard loop's); ZeroMQ's I/O thread only lowers the
// in-flight counts (atomics shared with the payload owners).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/transport/message.hpp"
#include "server/shard_messages.hpp"

namespace pstrain::server {

class PullReplyOrder {
 public:
  // REQUIRES: window_bytes > 0, part_bytes > 0.
  PullReplyOrder(size_t window_bytes, size_t part_bytes);

  // Holds reply `o` (a PULL_REPLY to o.peer) chunk by chunk. A reply without
  // chunks is queued whole, in arrival order before any chunk.
  void Add(Outgoing o);
  // The messages that may go now (peer, message), lowest chunk id first per
  // peer, each peer's in-flight bytes counted as they are taken.
  std::vector<std::pair<std::string, transport::OutMessage>> Take();
  // Every message still held, window or not (the shard is exiting).
  std::vector<std::pair<std::string, transport::OutMessage>> TakeAll();
  bool empty() const;
  // Bytes ZeroMQ holds for `peer` now (for tests).
  int64_t in_flight(const std::string& peer) const;

 private:
  struct Entry {
    std::shared_ptr<const pstrain::Header> header;  // the reply's fields, without chunks
    pstrain::ChunkRef chunk;
    std::shared_ptr<const std::vector<float>> payload;
  };
  struct Peer {
    std::vector<pstrain::Header> empty_replies;  // no chunks: sent as they are
    // (chunk id, arrival) -> entry: begin() is the earliest in forward order.
    std::map<std::pair<uint32_t, uint64_t>, Entry> queued;
    std::shared_ptr<std::atomic<int64_t>> in_flight = std::make_shared<std::atomic<int64_t>>(0);
  };
  // Takes peer's next message (lowest ids, one reply's header) into `out`.
  void TakeOne(const std::string& name, Peer& peer,
               std::vector<std::pair<std::string, transport::OutMessage>>* out);

  size_t window_bytes_;
  size_t part_bytes_;
  uint64_t arrivals_ = 0;
  std::map<std::string, Peer> peers_;
};

}  // namespace pstrain::server
