// Shared pieces of the ShardState suites: a two-parameter net, scripted
// HELLO/INIT/PULL/PUSH messages (valid ones: ShardState::Handle takes only
// what transport::Validate accepted), a shard wrapper that records what it
// sends, and the hand-computed BSP trajectory.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "common/ps/key_placement.hpp"
#include "common/transport/validate.hpp"
#include "server/shard_state.hpp"
#include "tests/cpp/data_test_util.hpp"

namespace pstrain::server::test_support {

using Time = ShardState::TimePoint;
inline const Time kT0 = Time{} + std::chrono::hours(1);

// The net: "w" (6 values) and "b" (2). With 16-byte chunks: chunk 0 = w[0,4),
// 1 = w[4,6), 2 = b[0,2); values flattened in chunk order 0..7. With 2 shards
// shard 0 holds {0} and shard 1 holds {1, 2}.
constexpr int kValues = 8;
inline int64_t Offset(uint32_t id) { return id == 0 ? 0 : id == 1 ? 4 : 6; }
inline int64_t Length(uint32_t id) { return id == 0 ? 4 : 2; }
inline const std::vector<float> kInitial = {1, 2, 3, 4, 5, 6, 0.5f, -0.5f};

inline std::vector<pstrain::ParamMeta> Params() {
  pstrain::ParamMeta w, b;
  w.set_name("w");
  w.add_shape(2);
  w.add_shape(3);
  b.set_name("b");
  b.add_shape(2);
  return {w, b};
}

inline std::vector<uint32_t> ShardChunks(int shard, int shards) {
  return shard == 0 && shards == 2 ? std::vector<uint32_t>{0}
         : shards == 2             ? std::vector<uint32_t>{1, 2}
                                   : std::vector<uint32_t>{0, 1, 2};
}

// Gradient value i of worker w at iteration t: exact in float, so averages
// computed by hand in double are exact too.
inline float Grad(int w, int64_t t, int i) {
  return 0.25f * static_cast<float>(w + 1) - 0.125f * static_cast<float>(i) +
         0.5f * static_cast<float>(t);
}
// Values whose float sum depends on the order of addition.
inline float RoughGrad(int w, int64_t t, int i) {
  return static_cast<float>(std::sin(1.7 * w + 0.3 * static_cast<double>(t) + 0.9 * i) *
                            std::pow(10.0, (w + i) % 4));
}
using GradFn = float (*)(int, int64_t, int);

inline ShardConfig Config(ConsistencyMode mode, int workers, int staleness = 0, int shard = 0,
                          int shards = 1) {
  ShardConfig c;
  c.shard = shard;
  c.num_shards = shards;
  c.num_workers = workers;
  c.mode = mode;
  c.staleness = staleness;
  c.hyper.base_lr = 0.1f;
  c.hyper.momentum = 0.9f;
  c.chunk_bytes = 16;
  return c;
}

// An Incoming that owns its payloads.
class Message {
 public:
  Message(pstrain::MessageType type, int sender, int64_t clock,
          pstrain::Role role = pstrain::WORKER)
      : peer_(std::string(role == pstrain::WORKER ? "w" : "s") + std::to_string(sender)) {
    in_.header.set_type(type);
    in_.header.set_role(role);
    in_.header.set_sender(sender);
    in_.header.set_clock(clock);
  }
  pstrain::Header& header() { return in_.header; }
  Message& Peer(std::string peer) {
    peer_ = std::move(peer);
    return *this;
  }
  Message& Chunk(uint32_t id, std::vector<float> values) {
    pstrain::ChunkRef* ref = in_.header.add_chunks();
    ref->set_id(id);
    ref->set_length(values.size());
    data_.push_back(std::move(values));
    return *this;
  }
  const Incoming& get() {
    in_.peer = peer_;
    in_.payloads.clear();
    scratch_ = data_;  // the shard may clobber payloads; each get() hands out fresh copies
    for (auto& d : scratch_) in_.payloads.push_back(d.data());
    return in_;
  }

 private:
  std::string peer_;
  Incoming in_;
  std::vector<std::vector<float>> data_;
  std::vector<std::vector<float>> scratch_;
};

inline Message Hello(int w, int world) {
  Message m(pstrain::HELLO, w, 0);
  m.header().set_world_size(world);
  return m;
}

inline Message Init(int shard, int shards, std::vector<pstrain::ParamMeta> params = Params(),
                    float add = 0) {
  Message m(pstrain::INIT_PUSH, 0, 0);
  for (const auto& p : params) *m.header().add_params() = p;
  for (uint32_t id : ShardChunks(shard, shards)) {
    std::vector<float> v(kInitial.begin() + Offset(id), kInitial.begin() + Offset(id) + Length(id));
    for (float& x : v) x += add;
    m.Chunk(id, v);
  }
  return m;
}

inline Message Pull(int w, int64_t t) { return Message(pstrain::PULL, w, t); }

inline Message Push(int w, int64_t t, const std::vector<uint32_t>& ids, GradFn grad = Grad) {
  Message m(pstrain::PUSH, w, t);
  double ss = 0;
  for (int i = 0; i < kValues; ++i) ss += double{grad(w, t, i)} * grad(w, t, i);
  m.header().set_sum_squares(ss);
  for (uint32_t id : ids) {
    std::vector<float> v;
    for (int64_t i = Offset(id); i < Offset(id) + Length(id); ++i) {
      v.push_back(grad(w, t, static_cast<int>(i)));
    }
    m.Chunk(id, v);
  }
  return m;
}

// One shard under test with its log lines.
struct Shard {
  explicit Shard(ShardConfig c) : server(std::move(c)) { Listen(); }
  void Listen() {
    server.log = [this](const std::string& line) { logs.push_back(line); };
  }
  std::vector<Outgoing> Send(Message m, Time now = kT0) { return server.Handle(m.get(), now); }
  // All values this shard holds, by flat index (NaN where not held).
  std::vector<float> Weights() const {
    std::vector<float> v(kValues, NAN);
    for (uint32_t id : server.store()->chunk_ids()) {
      auto w = server.store()->weights(id);
      std::copy(w.begin(), w.end(), v.begin() + Offset(id));
    }
    return v;
  }
  ShardState server;
  std::vector<std::string> logs;
};

inline int Count(const std::vector<Outgoing>& out, pstrain::MessageType type) {
  return static_cast<int>(std::count_if(
      out.begin(), out.end(), [&](const Outgoing& o) { return o.header.type() == type; }));
}
inline const Outgoing* Find(const std::vector<Outgoing>& out, pstrain::MessageType type,
                            const std::string& peer = "") {
  for (const Outgoing& o : out) {
    if (o.header.type() == type && (peer.empty() || o.peer == peer)) return &o;
  }
  return nullptr;
}

// Expected weights of BSP SGD (lr 0.1, momentum 0.9) over `steps` steps of W
// workers' averaged Grad, computed in double.
inline std::vector<double> HandBsp(int workers, int steps) {
  std::vector<double> x(kInitial.begin(), kInitial.end()), v(kValues, 0.0);
  for (int t = 0; t < steps; ++t) {
    for (int i = 0; i < kValues; ++i) {
      double avg = 0;
      for (int w = 0; w < workers; ++w) avg += Grad(w, t, i);
      avg /= workers;
      v[static_cast<size_t>(i)] = 0.9 * v[static_cast<size_t>(i)] + 0.1 * avg;
      x[static_cast<size_t>(i)] -= v[static_cast<size_t>(i)];
    }
  }
  return x;
}

// The factor suites' net (tests/cpp/factor_relay_test.cpp, factor_right_test.cpp):
// an fc weight "w" of 4 x 3 and its bias "b" (4); with 16-byte chunks on 2 shards w is
// chunks 0-2, b chunk 3. Adds both to an INIT_PUSH.
inline void AddFactorNetParams(Message* init) {
  pstrain::ParamMeta w, b;
  w.set_name("w");
  w.add_shape(4);
  w.add_shape(3);
  b.set_name("b");
  b.add_shape(4);
  *init->header().add_params() = w;
  *init->header().add_params() = b;
}

// The factor net's placement on 2 shards (16-byte chunks).
inline KeyPlacement FactorTwoShards() {
  auto placement = KeyPlacement::Create({12, 4}, 2, 16);
  EXPECT_TRUE(placement.ok());
  return std::move(placement.value());
}

// Shard 0's PULL_REPLY relay of parameter 0 at clock 3 for 2 workers of 2
// samples (chunks 0 and 2, scale 0.5), worker w's entry with its R when
// right(w); the caller adds the frames.
inline pstrain::Header FactorRelayReply(const std::function<bool(uint32_t)>& right) {
  pstrain::Header h;
  h.set_type(pstrain::PULL_REPLY);
  h.set_role(pstrain::SERVER);
  h.set_sender(0);
  h.set_clock(3);
  h.set_version(3);
  h.set_reply_chunks_total(2);
  h.set_relay_scale(0.5f);
  h.add_relayed_chunks(0);
  h.add_relayed_chunks(2);
  for (uint32_t w : {0u, 1u}) {
    pstrain::RelayedFactors* r = h.add_relay();
    r->set_param(0);
    r->set_worker(w);
    r->set_samples(2);
    r->set_cols(3);
    r->set_right(right(w));
  }
  return h;
}

// Validate's reason (empty when it passes) for a message of `header` with
// frames of `frames` bytes, as `receiver` (on shard `shard`) of a job of 2
// workers and 2 shards placed by `placement` sees it.
inline std::string FactorTwoShardsReason(const pstrain::Header& header,
                                         const std::vector<size_t>& frames,
                                         const KeyPlacement& placement, pstrain::Role receiver,
                                         int shard) {
  transport::InMessage in;
  in.header = header;
  for (size_t bytes : frames) in.frames.emplace_back(bytes);
  in.AlignPayloads();
  transport::ValidationRules rules;
  rules.receiver = receiver;
  rules.num_workers = 2;
  rules.num_servers = 2;
  rules.placement = &placement;
  rules.shard = shard;
  return transport::Validate(in, rules).message();
}

}  // namespace pstrain::server::test_support
