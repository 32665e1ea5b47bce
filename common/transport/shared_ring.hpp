// Payload frames through shared memory between processes on one machine
// (docs/wire-protocol.md, "Shared memory on one machine").
//
// Over ipc endpoints a sender copies each large payload frame once into a
// ring of its own (a memfd, mapped shared) and sends, in its place, an empty
// frame plus a trailer frame that says where the bytes are. The receiver maps
// the sender's memfd through /proc/<pid>/fd/<fd> (the kernel lets only the
// same user, or root, open it), reads the bytes in place and marks the slot
// free when the last frame over it is dropped. The bulk of the data then
// never passes through a socket: no kernel copies, no I/O-thread wake-ups per
// 64 KB. A ring that is full sends the frame through the socket as before.
//
// Threads: a SendRing and a RingReader belong to one Channel (one thread). A
// received payload may be released on any thread of the receiving process.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.hpp"
#include "common/transport/message.hpp"

namespace pstrain::transport {

// Payload frames smaller than this travel through the socket.
inline constexpr size_t kSharedRingMinFrameBytes = 16 << 10;
// ps-server's and ps-worker's --shared-memory-mb: a ring's size, per peer.
inline constexpr int kSharedRingDefaultMb = 16;
inline constexpr int kSharedRingMaxMb = 4096;

// Names one sender's ring: its process, the memfd's descriptor in it, and a
// random token written in the ring's header (a recycled pid or descriptor
// number cannot pass for it).
struct RingId {
  uint32_t pid = 0;
  int32_t fd = -1;
  uint8_t token[16] = {};
  uint64_t file_bytes = 0;  // size of the memfd: control area + data
};

// One payload's place in a ring.
struct RingSlot {
  uint32_t frame = 0;  // index of the payload frame it stands for (0 = first payload)
  uint32_t entry = 0;  // the ring's slot-state entry that is 1 while the receiver holds it
  uint64_t offset = 0;
  uint64_t bytes = 0;
};

// The trailer frame of a message whose payloads went through a ring.
struct RingTrailer {
  RingId ring;
  std::vector<RingSlot> slots;
};
std::string EncodeTrailer(const RingTrailer& trailer);
// True when `bytes` starts like a trailer (its magic); DecodeTrailer then
// checks the rest.
bool LooksLikeTrailer(const void* bytes, size_t size);
// Errors: "shared-memory trailer: <what is wrong>".
Result<RingTrailer> DecodeTrailer(const void* bytes, size_t size);

class SendRing {
 public:
  // A ring with `data_bytes` of payload space (rounded up to a page).
  // Errors: memfd_create, ftruncate or mmap failing (named).
  static Result<std::unique_ptr<SendRing>> Create(size_t data_bytes);
  ~SendRing();
  SendRing(const SendRing&) = delete;
  SendRing& operator=(const SendRing&) = delete;

  // Copies `bytes` (a multiple of 4) into the ring and marks the slot held;
  // std::nullopt when there is no room (the caller sends the frame inline).
  std::optional<RingSlot> Put(const void* data, size_t bytes);
  // No room and the oldest slot held for longer than `patience`: its receiver
  // has probably died with it. The caller then starts a new ring (the
  // receivers keep their mapping of this one until they drop it).
  bool Stuck(std::chrono::milliseconds patience) const;
  const RingId& id() const { return id_; }

 private:
  struct Held {
    uint32_t entry;
    uint64_t offset;
    std::chrono::steady_clock::time_point since;
  };
  SendRing() = default;
  void Reclaim();

  RingId id_;
  unsigned char* base_ = nullptr;
  size_t data_bytes_ = 0;
  // The slots put and not yet seen free, in the order they were put: their
  // entries are consecutive (mod the entry count), ending before next_entry_.
  std::deque<Held> held_;
  uint32_t next_entry_ = 0;
  uint64_t head_ = 0;  // where the next slot starts
  bool full_ = false;  // the last Put found no room
};

class RingReader {
 public:
  RingReader() = default;
  RingReader(const RingReader&) = delete;
  RingReader& operator=(const RingReader&) = delete;
  ~RingReader();

  // The payload of `slot` in `ring`, read in place; the slot is freed for
  // the sender when the payload's owner (and every frame over it) is gone.
  // Maps the ring on first use. Errors name the ring and what failed: the
  // descriptor cannot be opened (another user's process, or one that
  // exited), the file is not the sender's ring (size, token, owner), the slot
  // lies outside the ring or is not held.
  Result<Payload> Take(const RingId& ring, const RingSlot& slot);

 private:
  struct Mapping;
  Result<std::shared_ptr<Mapping>> Map(const RingId& ring);

  // Rings mapped, most recently used last: at most 256 (a ring per sending
  // peer); the least recently used one dropped is unmapped once no frame
  // uses it.
  std::vector<std::shared_ptr<Mapping>> mappings_;
};

}  // namespace pstrain::transport
