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
#include <string_view>
#include <vector>

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
  size_t bytes() const { return count * sizeof(float); }
};

// One frame of a message, as ZeroMQ holds it: received frames are ZeroMQ's
// receive buffers, read in place; a frame made with Of(payload) hands the
// payload's memory to ZeroMQ without a copy. Move-only. Small frames (up to
// 33 bytes) live inside the Frame object itself, so their data() changes
// when the Frame moves.
class Frame {
 public:
  Frame();                                 // empty
  explicit Frame(size_t bytes);            // `bytes` uninitialised bytes to fill in
  explicit Frame(std::string_view bytes);  // a copy of `bytes`
  // Zero-copy: the frame holds a reference to payload.owner, dropped by
  // ZeroMQ (possibly on its I/O thread) when it is done with the bytes.
  static Frame Of(const Payload& payload);
  // Another frame over the same bytes (ZeroMQ counts the references; frames
  // small enough to live inside the Frame are copied).
  Frame Share();
  ~Frame();
  Frame(Frame&& other) noexcept;
  Frame& operator=(Frame&& other) noexcept;
  Frame(const Frame&) = delete;
  Frame& operator=(const Frame&) = delete;

  void* data();
  const void* data() const;
  size_t size() const;
  bool more() const;  // received: another frame of the message follows

 private:
  friend class FrameAccess;  // channel.cpp: the ZeroMQ message inside
  // ZeroMQ's zmq_msg_t (64 bytes, pointer-aligned), kept opaque here.
  alignas(8) unsigned char message_[64];
};

// The payload frames a message with `header` has: one per header chunk, two
// for a PUSH of sufficient factors (Header.factors: left and right), none for
// a GPU IPC PUSH (Header.ipc_offsets: the values are in the worker's region);
// a factor PUSH: L and R, or L alone with right_forwarded; FACTOR_RIGHT: R;
// a PULL_REPLY adds its history frames (history_slots per history chunk) and
// its relayed factors' (L, and R where `right`): docs/wire-protocol.md.
inline size_t PayloadFrames(const pstrain::Header& header) {
  if (header.ipc_offsets_size() > 0) return 0;
  if (header.has_factors()) return header.factors().right_forwarded() ? 1 : 2;
  if (header.has_right()) return 1;  // FACTOR_RIGHT: R
  size_t frames = static_cast<size_t>(header.chunks_size()) +
                  static_cast<size_t>(header.history_slots()) *
                      static_cast<size_t>(header.history_chunks_size());
  for (const pstrain::RelayedFactors& r : header.relay()) frames += r.right() ? 2 : 1;
  return frames;
}

// What a channel sends. REQUIRES (checked by Channel::Send): PayloadFrames(header)
// == payloads.size() and, without factors, header.chunks(i).length() == payloads[i].count.
struct OutMessage {
  pstrain::Header header;
  std::vector<Payload> payloads;
};

// One received message. Frames must not be added, removed or reordered once
// received (payload() relies on where they are).
struct InMessage {
  std::string peer;  // ROUTER routing id of the sender; "" on a DEALER
  // A CURVE ROUTER: the peer name the ZAP handler gave the sender's key
  // ("worker 3", curve.hpp's PeerName); "" without CURVE.
  std::string user_id;
  pstrain::Header header;
  std::vector<Frame> frames;  // payload frames (frame 0, the header, already parsed)
  size_t header_bytes = 0;    // size of frame 0 as received

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

// A routing id as text: itself when printable ASCII, else "0x" + hex bytes
// (ZeroMQ's generated ids are binary).
std::string PrintablePeer(const std::string& peer);

// "PUSH from worker 1 (peer 'w1')": for log lines and error context.
std::string Describe(const InMessage& message);

}  // namespace pstrain::transport
