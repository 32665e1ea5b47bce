#include "server/pull_reply_order.hpp"

#include "common/status.hpp"

namespace pstrain::server {

PullReplyOrder::PullReplyOrder(size_t window_bytes, size_t part_bytes)
    : window_bytes_(window_bytes), part_bytes_(part_bytes) {
  PSTRAIN_CHECK(window_bytes > 0 && part_bytes > 0);
}

void PullReplyOrder::Add(Outgoing o) {
  Peer& peer = peers_[o.peer];
  if (o.header.chunks_size() == 0) {
    peer.empty_replies.push_back(std::move(o.header));
    return;
  }
  auto fields = std::make_shared<pstrain::Header>(o.header);
  fields->clear_chunks();
  std::shared_ptr<const pstrain::Header> shared = std::move(fields);
  for (int i = 0; i < o.header.chunks_size(); ++i) {
    const pstrain::ChunkRef& chunk = o.header.chunks(i);
    peer.queued.emplace(std::make_pair(chunk.id(), arrivals_++),
                        Entry{shared, chunk, std::move(o.payloads[static_cast<size_t>(i)])});
  }
}

void PullReplyOrder::TakeOne(const std::string& name, Peer& peer,
                             std::vector<std::pair<std::string, transport::OutMessage>>* out) {
  if (!peer.empty_replies.empty()) {
    for (pstrain::Header& h : peer.empty_replies) out->emplace_back(name, transport::OutMessage{std::move(h), {}});
    peer.empty_replies.clear();
    return;
  }
  auto it = peer.queued.begin();
  const std::shared_ptr<const pstrain::Header> fields = it->second.header;
  transport::OutMessage m{*fields, {}};
  size_t bytes = 0;
  // The owner ZeroMQ holds of each payload: lowers the peer's count when let go.
  auto counted = [counter = peer.in_flight](std::shared_ptr<const std::vector<float>> values) {
    const int64_t n = static_cast<int64_t>(values->size() * sizeof(float));
    counter->fetch_add(n, std::memory_order_relaxed);
    const float* data = values->data();
    const size_t count = values->size();
    std::shared_ptr<const void> owner(values.get(), [counter, values, n](const void*) {
      counter->fetch_sub(n, std::memory_order_relaxed);
    });
    return transport::Payload{std::move(owner), data, count};
  };
  // Consecutive lowest ids of the same reply, up to part_bytes_ (one at least).
  while (it != peer.queued.end() && it->second.header == fields) {
    const size_t chunk_bytes = it->second.payload->size() * sizeof(float);
    if (bytes > 0 && bytes + chunk_bytes > part_bytes_) break;
    *m.header.add_chunks() = it->second.chunk;
    m.payloads.push_back(counted(std::move(it->second.payload)));
    bytes += chunk_bytes;
    it = peer.queued.erase(it);
  }
  out->emplace_back(name, std::move(m));
}

std::vector<std::pair<std::string, transport::OutMessage>> PullReplyOrder::Take() {
  std::vector<std::pair<std::string, transport::OutMessage>> out;
  for (auto it = peers_.begin(); it != peers_.end();) {
    Peer& peer = it->second;
    while (!peer.empty_replies.empty() ||
           (!peer.queued.empty() &&
            peer.in_flight->load(std::memory_order_relaxed) < static_cast<int64_t>(window_bytes_))) {
      TakeOne(it->first, peer, &out);
    }
    // A peer with nothing queued and nothing in flight is forgotten.
    if (peer.queued.empty() && peer.in_flight->load(std::memory_order_relaxed) == 0) {
      it = peers_.erase(it);
    } else {
      ++it;
    }
  }
  return out;
}

std::vector<std::pair<std::string, transport::OutMessage>> PullReplyOrder::TakeAll() {
  std::vector<std::pair<std::string, transport::OutMessage>> out;
  for (auto& [name, peer] : peers_) {
    while (!peer.empty_replies.empty() || !peer.queued.empty()) TakeOne(name, peer, &out);
  }
  peers_.clear();
  return out;
}

bool PullReplyOrder::empty() const {
  for (const auto& [name, peer] : peers_) {
    if (!peer.queued.empty() || !peer.empty_replies.empty()) return false;
  }
  return true;
}

int64_t PullReplyOrder::in_flight(const std::string& peer) const {
  auto it = peers_.find(peer);
  return it == peers_.end() ? 0 : it->second.in_flight->load(std::memory_order_relaxed);
}

}  // namespace pstrain::server
