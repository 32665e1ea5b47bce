#include "common/transport/message.hpp"

#include <cstdint>
#include <cstring>
#include <utility>

#include "common/status.hpp"

namespace pstrain::transport {
namespace {

void ReleaseOwner(void* /*data*/, void* hint) {
  delete static_cast<std::shared_ptr<const void>*>(hint);
}

// True when `frame` must be copied before it can be read as floats: its data
// is not 4-aligned, or it lives inside the zmq_msg_t itself (ZeroMQ keeps
// frames of up to 33 bytes there, so their address changes when the frame
// object moves).
bool NeedsAlignedCopy(const zmq::message_t& frame) {
  const auto* data = static_cast<const unsigned char*>(frame.data());
  const auto* self = reinterpret_cast<const unsigned char*>(&frame);
  bool inside = data >= self && data < self + sizeof(frame);
  return inside || reinterpret_cast<uintptr_t>(data) % alignof(float) != 0;
}

}  // namespace

Payload Payload::Of(std::shared_ptr<const std::vector<float>> values) {
  PSTRAIN_CHECK(values != nullptr);
  size_t count = values->size();
  return Slice(std::move(values), 0, count);
}

Payload Payload::Slice(std::shared_ptr<const std::vector<float>> values, size_t offset,
                       size_t count) {
  PSTRAIN_CHECK(values != nullptr);
  PSTRAIN_CHECK(offset <= values->size() && count <= values->size() - offset);
  const float* data = values->data() + offset;
  return Payload{std::move(values), data, count};
}

Payload Payload::Borrow(const float* data, size_t count, std::shared_ptr<const void> owner) {
  PSTRAIN_CHECK(owner != nullptr);
  PSTRAIN_CHECK(count == 0 || reinterpret_cast<uintptr_t>(data) % alignof(float) == 0);
  return Payload{std::move(owner), data, count};
}

zmq::message_t PayloadFrame(const Payload& payload) {
  if (payload.count == 0) return zmq::message_t();
  auto* hint = new std::shared_ptr<const void>(payload.owner);
  try {
    // Fails only when out of memory; then ZeroMQ never calls ReleaseOwner.
    return zmq::message_t(const_cast<float*>(payload.data), payload.bytes(), &ReleaseOwner, hint);
  } catch (...) {
    delete hint;
    throw;
  }
}

const float* InMessage::payload(size_t i) const {
  PSTRAIN_CHECK(i < frames.size());
  if (i < aligned.size() && !aligned[i].empty()) return aligned[i].data();
  PSTRAIN_CHECK_MSG(!NeedsAlignedCopy(frames[i]) || frames[i].size() == 0,
                    "payload frame not aligned: call AlignPayloads()");
  return static_cast<const float*>(frames[i].data());
}

size_t InMessage::bytes() const {
  size_t total = header_bytes;
  for (const auto& frame : frames) total += frame.size();
  return total;
}

void InMessage::AlignPayloads() {
  aligned.clear();
  for (size_t i = 0; i < frames.size(); ++i) {
    const zmq::message_t& frame = frames[i];
    if (frame.size() == 0 || frame.size() % sizeof(float) != 0 || !NeedsAlignedCopy(frame)) {
      continue;
    }
    aligned.resize(frames.size());
    aligned[i].resize(frame.size() / sizeof(float));
    std::memcpy(aligned[i].data(), frame.data(), frame.size());
  }
}

std::string PrintablePeer(const std::string& peer) {
  bool printable = !peer.empty();
  for (unsigned char c : peer) printable = printable && c >= 0x20 && c < 0x7f;
  if (printable) return peer;
  static const char kHex[] = "0123456789abcdef";
  std::string text = "0x";
  for (unsigned char c : peer) {
    text += kHex[c >> 4];
    text += kHex[c & 15];
  }
  return text;
}

std::string Describe(const InMessage& message) {
  const Header& h = message.header;
  std::string role = h.role() == WORKER ? "worker" : h.role() == SERVER ? "server" : "control";
  std::string text =
      MessageType_Name(h.type()) + " from " + role + " " + std::to_string(h.sender());
  if (!message.peer.empty()) text += " (peer '" + PrintablePeer(message.peer) + "')";
  return text;
}

}  // namespace pstrain::transport
