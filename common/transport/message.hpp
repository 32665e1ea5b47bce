// Messages as they travel between workers and servers (docs/wire-protocol.md).
//
// A message is multipart: frame 0 is a serialized pstrain::Header, then one
// raw little-endian float32 payload frame per entry of Header.chunks, in
// order. Outgoing payloads are never copied: a Payload names read-only floats
// and the owner that keeps them alive until ZeroMQ has sent them. Incoming
// payload frames are the buffers ZeroMQ received into; they are read in place
// (copied only when ZeroMQ placed them at an address that is not 4-aligned,
// which happens only for small frames).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "proto/pstrain.pb.h"

namespace pstrain::transport {

// Read-only floats handed to ZeroMQ without copying. The memory must not
// change until the owner is released (ZeroMQ drops its reference once the
// frame is sent or, over inproc, once the receiver drops the frame).
struct Payload {
  std::shared_ptr<const void> owner;  // keeps `data` alive; never null
  const float* data = nullptr;
  size_t count = 0;  // values

  // The whole vector. REQUIRES: values != nullptr.
  static Payload Of(std::shared_ptr<const std::vector<float>> values);
  // values[offset, offset + count). REQUIRES: offset + count <= values->size().
  static Payload Slice(std::shared_ptr<const std::vector<float>> values, size_t offset,
                       size_t count);
  // Any memory kept alive by `owner` (e.g. a pinned buffer, a Blob).
  // REQUIRES: owner != nullptr; data 4-byte aligned (or count == 0).
  static Payload Borrow(const float* data, size_t count, std::shared_ptr<const void> owner);

  size_t bytes() const { return count * sizeof(float); }
};

// What a channel sends. REQUIRES (checked by Channel::Send):
// header.chunks_size() == payloads.size() and header.chunks(i).length() == payloads[i].count.
struct OutMessage {
  pstrain::Header header;
  std::vector<Payload> payloads;
};

// One received message. Frames must not be added, removed or reordered once
// received (payload() relies on where they are).
struct InMessage {
  std::string peer;  // ROUTER routing id of the sender; "" on a DEALER
  pstrain::Header header;
  std::vector<zmq::message_t> frames;  // payload frames (frame 0, the header, already parsed)
  size_t header_bytes = 0;             // size of frame 0 as received

  size_t payload_count() const { return frames.size(); }
  // The values of payload frame i, 4-aligned.
  // REQUIRES: Validate() accepted the message (frame size a multiple of 4).
  const float* payload(size_t i) const;
  // The same values, writable: the receiver owns the message and may use a
  // payload as scratch (the shard applies gradients in place).
  float* mutable_payload(size_t i) { return const_cast<float*>(payload(i)); }
  // Values in payload frame i (bytes / 4, rounded down).
  size_t payload_length(size_t i) const { return frames[i].size() / sizeof(float); }
  size_t payload_bytes(size_t i) const { return frames[i].size(); }
  size_t bytes() const;  // all frames, header included

  // Makes aligned copies of the payload frames that need one. Receive calls
  // it; call it again only on an InMessage assembled by hand.
  void AlignPayloads();

  // Aligned copies, indexed like frames; empty where the frame is read in place.
  std::vector<std::vector<float>> aligned;
};

// A zero-copy ZeroMQ frame over the payload: the frame holds a reference to
// payload.owner, dropped by ZeroMQ (possibly on its I/O thread) when done.
zmq::message_t PayloadFrame(const Payload& payload);

// A routing id as text: itself when printable ASCII, else "0x" + hex bytes
// (ZeroMQ's generated ids are binary).
std::string PrintablePeer(const std::string& peer);

// "PUSH from worker 1 (peer 'w1')": for log lines and error context.
std::string Describe(const InMessage& message);

}  // namespace pstrain::transport
