#include "common/transport/message.hpp"

#include <zmq.h>

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
// is not 4-aligned, or it lives inside the Frame itself (ZeroMQ keeps frames
// of up to 33 bytes there, so their address changes when the frame moves).
bool NeedsAlignedCopy(const Frame& frame) {
  const auto* data = static_cast<const unsigned char*>(frame.data());
  const auto* self = reinterpret_cast<const unsigned char*>(&frame);
  bool inside = data >= self && data < self + sizeof(frame);
  return inside || reinterpret_cast<uintptr_t>(data) % alignof(float) != 0;
}

zmq_msg_t* Msg(unsigned char* storage) { return reinterpret_cast<zmq_msg_t*>(storage); }
const zmq_msg_t* Msg(const unsigned char* storage) {
  return reinterpret_cast<const zmq_msg_t*>(storage);
}

}  // namespace

static_assert(sizeof(zmq_msg_t) == 64 && alignof(zmq_msg_t) <= 8,
              "Frame's storage must hold a zmq_msg_t");

Frame::Frame() { zmq_msg_init(Msg(message_)); }

Frame::Frame(size_t bytes) {
  // Fails only when out of memory.
  PSTRAIN_CHECK_MSG(zmq_msg_init_size(Msg(message_), bytes) == 0, "out of memory for a frame");
}

Frame::Frame(std::string_view bytes) : Frame(bytes.size()) {
  if (!bytes.empty()) std::memcpy(data(), bytes.data(), bytes.size());
}

Frame Frame::Of(const Payload& payload) {
  Frame frame;
  if (payload.count == 0) return frame;
  auto* hint = new std::shared_ptr<const void>(payload.owner);
  // Fails only when out of memory; then ZeroMQ never calls ReleaseOwner.
  if (zmq_msg_init_data(Msg(frame.message_), const_cast<float*>(payload.data), payload.bytes(),
                        &ReleaseOwner, hint) != 0) {
    delete hint;
    PSTRAIN_CHECK_MSG(false, "out of memory for a frame");
  }
  return frame;
}

Frame Frame::Share() {
  Frame shared;
  PSTRAIN_CHECK(zmq_msg_copy(Msg(shared.message_), Msg(message_)) == 0);
  return shared;
}

Frame::~Frame() { zmq_msg_close(Msg(message_)); }

Frame::Frame(Frame&& other) noexcept {
  zmq_msg_init(Msg(message_));
  zmq_msg_move(Msg(message_), Msg(other.message_));
}

Frame& Frame::operator=(Frame&& other) noexcept {
  if (this != &other) zmq_msg_move(Msg(message_), Msg(other.message_));  // closes the old one
  return *this;
}

void* Frame::data() { return zmq_msg_data(Msg(message_)); }
const void* Frame::data() const { return zmq_msg_data(const_cast<zmq_msg_t*>(Msg(message_))); }
size_t Frame::size() const { return zmq_msg_size(Msg(message_)); }
bool Frame::more() const { return zmq_msg_more(Msg(message_)) != 0; }

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
    const Frame& frame = frames[i];
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
  if (!message.user_id.empty()) text += " (key of " + message.user_id + ")";
  return text;
}

}  // namespace pstrain::transport
