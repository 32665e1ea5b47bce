// ShardServer driven by scripted message arrivals: BSP aggregation (rank
// order, one step, arrival-order independent), SSP/ASP bounds and staleness,
// the clip_gradients norm exchange between two shards, the checkpoint
// barrier and Restore, and bad or duplicate messages.
#include "server/shard_server.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "tests/cpp/data_test_util.hpp"

namespace pstrain::server {
namespace {

using Time = ShardServer::TimePoint;
const Time kT0 = Time{} + std::chrono::hours(1);

// The net: "w" (6 values) and "b" (2). With 16-byte chunks: chunk 0 = w[0,4),
// 1 = w[4,6), 2 = b[0,2); values flattened in chunk order 0..7. With 2 shards
// shard 0 holds {0} and shard 1 holds {1, 2}.
constexpr int kValues = 8;
int64_t Offset(uint32_t id) { return id == 0 ? 0 : id == 1 ? 4 : 6; }
int64_t Length(uint32_t id) { return id == 0 ? 4 : 2; }
const std::vector<float> kInitial = {1, 2, 3, 4, 5, 6, 0.5f, -0.5f};

std::vector<pstrain::ParamMeta> Params() {
  pstrain::ParamMeta w, b;
  w.set_name("w");
  w.add_shape(2);
  w.add_shape(3);
  b.set_name("b");
  b.add_shape(2);
  return {w, b};
}

std::vector<uint32_t> ShardChunks(int shard, int shards) {
  return shard == 0 && shards == 2 ? std::vector<uint32_t>{0}
         : shards == 2             ? std::vector<uint32_t>{1, 2}
                                   : std::vector<uint32_t>{0, 1, 2};
}

// Gradient value i of worker w at iteration t: exact in float, so averages
// computed by hand in double are exact too.
float Grad(int w, int64_t t, int i) {
  return 0.25f * static_cast<float>(w + 1) - 0.125f * static_cast<float>(i) +
         0.5f * static_cast<float>(t);
}
// Values whose float sum depends on the order of addition.
float RoughGrad(int w, int64_t t, int i) {
  return static_cast<float>(std::sin(1.7 * w + 0.3 * static_cast<double>(t) + 0.9 * i) *
                            std::pow(10.0, (w + i) % 4));
}
using GradFn = float (*)(int, int64_t, int);

ShardConfig Config(Mode mode, int workers, int staleness = 0, int shard = 0, int shards = 1) {
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

Message Hello(int w, int world) {
  Message m(pstrain::HELLO, w, 0);
  m.header().set_world_size(world);
  return m;
}

Message Init(int shard, int shards, std::vector<pstrain::ParamMeta> params = Params(),
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

Message Pull(int w, int64_t t, uint64_t request = 0) {
  Message m(pstrain::PULL, w, t);
  m.header().set_request_id(request);
  return m;
}

Message Push(int w, int64_t t, const std::vector<uint32_t>& ids, GradFn grad = Grad) {
  Message m(pstrain::PUSH, w, t);
  m.header().set_request_id(static_cast<uint64_t>(100 * t + w));
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
  ShardServer server;
  std::vector<std::string> logs;
};

int Count(const std::vector<Outgoing>& out, pstrain::MessageType type) {
  return static_cast<int>(std::count_if(
      out.begin(), out.end(), [&](const Outgoing& o) { return o.header.type() == type; }));
}
const Outgoing* Find(const std::vector<Outgoing>& out, pstrain::MessageType type,
                     const std::string& peer = "") {
  for (const Outgoing& o : out) {
    if (o.header.type() == type && (peer.empty() || o.peer == peer)) return &o;
  }
  return nullptr;
}

// Expected weights of BSP SGD (lr 0.1, momentum 0.9) over `steps` steps of W
// workers' averaged Grad, computed in double.
std::vector<double> HandBsp(int workers, int steps) {
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

TEST(ShardServerTest, BspAppliesOneStepOfTheAverage) {
  Shard s(Config(Mode::kBsp, 2));
  EXPECT_EQ(Count(s.Send(Init(0, 1)), pstrain::INIT_ACK), 1);
  for (int t = 0; t < 2; ++t) {
    for (int w : {1, 0}) {
      auto out = s.Send(Pull(w, t));
      ASSERT_EQ(Count(out, pstrain::PULL_REPLY), 1) << "t " << t;
      EXPECT_EQ(out[0].header.version(), t);
    }
    EXPECT_EQ(Count(s.Send(Push(1, t, {2, 0})), pstrain::PUSH_ACK), 1);
    EXPECT_EQ(s.server.version(), t);  // chunk 1 of worker 1 is missing
    s.Send(Push(0, t, {0, 1, 2}));
    EXPECT_EQ(s.server.version(), t);
    s.Send(Push(1, t, {1}));
    EXPECT_EQ(s.server.version(), t + 1);
  }
  const std::vector<double> want = HandBsp(2, 2);
  const std::vector<float> got = s.Weights();
  for (int i = 0; i < kValues; ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << i;
  const pstrain::ShardStats stats = s.server.Stats();
  EXPECT_EQ(stats.version(), 2);
  EXPECT_EQ(stats.pushes_applied(), 4);
  EXPECT_EQ(stats.staleness_histogram_size(), 1);
  EXPECT_EQ(stats.staleness_histogram(0), 4);
  EXPECT_EQ(stats.staleness_max(), 1);
  EXPECT_EQ(stats.bad_messages(), 0);
}

TEST(ShardServerTest, BspWeightsDoNotDependOnArrivalOrder) {
  // 3 workers, one message per (worker, chunk), shuffled differently each run.
  std::vector<float> first;
  std::mt19937 rng(7);
  for (int run = 0; run < 12; ++run) {
    Shard s(Config(Mode::kBsp, 3));
    s.Send(Init(0, 1));
    for (int t = 0; t < 2; ++t) {
      std::vector<std::pair<int, uint32_t>> order;
      for (int w = 0; w < 3; ++w) {
        for (uint32_t id = 0; id < 3; ++id) order.emplace_back(w, id);
      }
      if (run > 0) std::shuffle(order.begin(), order.end(), rng);
      for (auto [w, id] : order) s.Send(Push(w, t, {id}, RoughGrad));
      ASSERT_EQ(s.server.version(), t + 1);
    }
    if (run == 0) {
      first = s.Weights();
    } else {
      EXPECT_EQ(std::memcmp(first.data(), s.Weights().data(), kValues * sizeof(float)), 0)
          << "run " << run;
    }
  }
}

TEST(ShardServerTest, BspPullWaitsForTheStepBefore) {
  // Each chunk goes out once its own step 0 is applied; the union of the
  // replies is the whole shard, the last part leaves at version 1.
  Shard s(Config(Mode::kBsp, 2));
  s.Send(Init(0, 1));
  s.Send(Push(0, 0, {0, 1, 2}));
  EXPECT_EQ(Count(s.Send(Pull(0, 1, 11)), pstrain::PULL_REPLY), 0);
  auto early = s.Send(Push(1, 0, {0, 1}));
  ASSERT_EQ(Count(early, pstrain::PULL_REPLY), 1);
  const Outgoing* part = Find(early, pstrain::PULL_REPLY);
  EXPECT_EQ(part->peer, "w0");
  EXPECT_EQ(part->header.request_id(), 11u);
  EXPECT_EQ(part->header.version(), 0);  // the shard's version when sent
  EXPECT_EQ(part->header.reply_chunks_total(), 3u);
  ASSERT_EQ(part->header.chunks_size(), 2);
  EXPECT_EQ(part->header.chunks(0).id(), 0u);
  EXPECT_EQ(part->header.chunks(1).id(), 1u);
  auto out = s.Send(Push(1, 0, {2}));
  ASSERT_EQ(Count(out, pstrain::PULL_REPLY), 1);
  const Outgoing* reply = Find(out, pstrain::PULL_REPLY);
  EXPECT_EQ(reply->peer, "w0");
  EXPECT_EQ(reply->header.request_id(), 11u);
  EXPECT_EQ(reply->header.version(), 1);
  EXPECT_EQ(reply->header.reply_chunks_total(), 3u);
  ASSERT_EQ(reply->header.chunks_size(), 1);
  EXPECT_EQ(reply->header.chunks(0).id(), 2u);
  EXPECT_EQ(reply->payloads.size(), 1u);
  EXPECT_EQ(part->payloads.size(), 2u);
  EXPECT_EQ(*part->payloads[1], (std::vector<float>{s.Weights()[4], s.Weights()[5]}));
  EXPECT_EQ(*reply->payloads[0], (std::vector<float>{s.Weights()[6], s.Weights()[7]}));
  EXPECT_EQ(Count(s.Send(Push(0, 1, {2})), pstrain::PULL_REPLY), 0);  // nothing sent twice
}

TEST(ShardServerTest, BspPullGetsTheEarlyChunkBeforeTheLateGradientsArrive) {
  Shard s(Config(Mode::kBsp, 1));
  s.Send(Init(0, 1));
  EXPECT_EQ(Count(s.Send(Pull(0, 1, 7)), pstrain::PULL_REPLY), 0);  // sent early
  // Chunk 0 (values 0..3) is pushed first, like a late layer's weights.
  auto out = s.Send(Push(0, 0, {0}));
  ASSERT_EQ(Count(out, pstrain::PULL_REPLY), 1);
  const Outgoing* early = Find(out, pstrain::PULL_REPLY);
  ASSERT_EQ(early->header.chunks_size(), 1);
  EXPECT_EQ(early->header.chunks(0).id(), 0u);
  const std::vector<double> stepped = HandBsp(1, 1);
  for (int i = 0; i < 4; ++i) {
    EXPECT_FLOAT_EQ((*early->payloads[0])[static_cast<size_t>(i)], stepped[static_cast<size_t>(i)]);
  }
  EXPECT_EQ(s.server.version(), 0);
  // A barrier-free pull for an iteration further ahead gets nothing yet.
  EXPECT_EQ(Count(s.Send(Pull(0, 2, 8)), pstrain::PULL_REPLY), 0);
  out = s.Send(Push(0, 0, {1, 2}));
  ASSERT_EQ(Count(out, pstrain::PULL_REPLY), 1);
  const Outgoing* rest = Find(out, pstrain::PULL_REPLY);
  EXPECT_EQ(rest->header.request_id(), 7u);
  ASSERT_EQ(rest->header.chunks_size(), 2);
  EXPECT_EQ(rest->header.chunks(0).id(), 1u);
  EXPECT_EQ(rest->header.chunks(1).id(), 2u);
  EXPECT_EQ(rest->header.version(), 1);
  for (int i = 4; i < kValues; ++i) {
    const size_t k = static_cast<size_t>(i);
    EXPECT_FLOAT_EQ((*rest->payloads[k < 6 ? 0 : 1])[k < 6 ? k - 4 : k - 6], stepped[k]);
  }
}

// Workers 0 (acts every round) and 1 (every third round) loop pull, push;
// every pull must be answered exactly when the bound holds.
void RunFastAndSlow(Mode mode, int staleness) {
  SCOPED_TRACE(std::string(ModeName(mode)) + " s=" + std::to_string(staleness));
  Shard s(Config(mode, 2, staleness));
  s.Send(Init(0, 1));
  std::vector<int64_t> iter(2, 0), pushed(2, 0);
  std::vector<int> state(2, 0);  // 0: will pull, 1: pull deferred, 2: pulled
  int deferred = 0;
  auto ready = [&](int64_t t) {
    const int64_t lo = std::min(pushed[0], pushed[1]);
    return mode == Mode::kAsp || lo >= t - staleness;
  };
  auto absorb = [&](const std::vector<Outgoing>& out) {
    for (const Outgoing& o : out) {
      if (o.header.type() != pstrain::PULL_REPLY) continue;
      const int w = o.peer == "w0" ? 0 : 1;
      EXPECT_EQ(state[static_cast<size_t>(w)], 1);
      EXPECT_TRUE(ready(o.header.clock()));
      state[static_cast<size_t>(w)] = 2;
    }
  };
  for (int round = 0; round < 40; ++round) {
    for (int w = 0; w < 2; ++w) {
      if (w == 1 && round % 3 != 2) continue;
      const size_t k = static_cast<size_t>(w);
      if (state[k] == 0) {
        const bool expect_answer = ready(iter[k]);
        state[k] = 1;
        absorb(s.Send(Pull(w, iter[k])));
        EXPECT_EQ(state[k] == 2, expect_answer) << "worker " << w << " iteration " << iter[k];
        deferred += state[k] == 1;
      } else if (state[k] == 2) {
        auto out = s.Send(Push(w, iter[k], {0, 1, 2}));
        ++pushed[k];  // complete when Handle returns, before any reply it releases
        absorb(out);
        ++iter[k];
        state[k] = 0;
      }
      const int64_t gap = std::max(pushed[0], pushed[1]) - std::min(pushed[0], pushed[1]);
      if (mode == Mode::kSsp) {
        EXPECT_LE(gap, staleness + 1);
      }
    }
  }
  const pstrain::ShardStats stats = s.server.Stats();
  if (mode == Mode::kSsp) {
    EXPECT_GT(deferred, 0);
    EXPECT_EQ(stats.staleness_max(), staleness + 1);
  } else {
    EXPECT_EQ(deferred, 0);
    EXPECT_GT(stats.staleness_max(), 4);
  }
  EXPECT_EQ(stats.pushes_applied(), pushed[0] + pushed[1]);
  EXPECT_EQ(stats.version(), (pushed[0] + pushed[1]) / 2);
}

TEST(ShardServerTest, SspAnswersAPullExactlyWhenEveryClockIsWithinTheBound) {
  for (int s : {0, 1, 3}) RunFastAndSlow(Mode::kSsp, s);
}

TEST(ShardServerTest, AspNeverDefers) { RunFastAndSlow(Mode::kAsp, 0); }

TEST(ShardServerTest, SspStalenessHistogram) {
  Shard s(Config(Mode::kSsp, 2, 1));
  s.Send(Init(0, 1));
  const std::vector<uint32_t> all = {0, 1, 2};
  s.Send(Pull(0, 0));
  s.Send(Pull(1, 0));
  s.Send(Push(0, 0, all));                                       // 0 - 0: staleness 0, version 0
  EXPECT_EQ(Count(s.Send(Pull(0, 1)), pstrain::PULL_REPLY), 1);  // served version 0
  s.Send(Push(0, 1, all));                                       // 0 - 0: 0, version 1
  EXPECT_EQ(Count(s.Send(Pull(0, 2)), pstrain::PULL_REPLY), 0);  // clock gap would be 3
  auto out = s.Send(Push(1, 0, all));                            // 1 - 0: 1, version 1
  ASSERT_NE(Find(out, pstrain::PULL_REPLY, "w0"), nullptr);      // served version 1
  EXPECT_EQ(Find(out, pstrain::PULL_REPLY, "w0")->header.version(), 1);
  s.Send(Pull(1, 1));       // served version 1
  s.Send(Push(1, 1, all));  // 1 - 1: 0, version 2
  s.Send(Push(0, 2, all));  // 2 - 1: 1, version 2
  const pstrain::ShardStats stats = s.server.Stats();
  EXPECT_EQ(
      std::vector<int64_t>(stats.staleness_histogram().begin(), stats.staleness_histogram().end()),
      (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(stats.version(), 2);
  EXPECT_EQ(stats.staleness_max(), 2);
  EXPECT_EQ(std::vector<int64_t>(stats.worker_clocks().begin(), stats.worker_clocks().end()),
            (std::vector<int64_t>{3, 2}));
}

TEST(ShardServerTest, SspAppliesEachPushOnArrivalScaledByOneOverW) {
  ShardConfig c = Config(Mode::kSsp, 2, 1);
  c.hyper.momentum = 0;
  Shard s(c);
  s.Send(Init(0, 1));
  s.Send(Push(1, 0, {0}));
  EXPECT_FLOAT_EQ(s.Weights()[0], kInitial[0] - 0.1f * 0.5f * Grad(1, 0, 0));
  EXPECT_FLOAT_EQ(s.Weights()[4], kInitial[4]);  // chunk 1 not pushed yet
}

// Delivers NORM_* messages between shard 0 and shard 1 until none is left.
void Route(std::vector<Outgoing> out, int from, Shard& s0, Shard& s1) {
  for (Outgoing& o : out) {
    if (o.to == Outgoing::To::kPeer) continue;
    Message m(o.header.type(), from, o.header.clock(), pstrain::SERVER);
    m.header().set_sum_squares(o.header.sum_squares());
    if (o.to == Outgoing::To::kCoordinator) {
      ASSERT_EQ(from, 1);
      Route(s0.Send(std::move(m)), 0, s0, s1);
    } else {
      ASSERT_EQ(from, 0);
      Route(s1.Send(std::move(m)), 1, s0, s1);
    }
  }
}

TEST(ShardServerTest, ClipGradientsOverTwoShardsEqualsOneShard) {
  auto clipped = [](ShardConfig c) {
    c.hyper.clip_gradients = 0.5f;
    c.hyper.momentum = 0.f;
    return c;
  };
  Shard one(clipped(Config(Mode::kBsp, 2)));
  Shard s0(clipped(Config(Mode::kBsp, 2, 0, 0, 2)));
  Shard s1(clipped(Config(Mode::kBsp, 2, 0, 1, 2)));
  one.Send(Init(0, 1));
  s0.Send(Init(0, 2));
  s1.Send(Init(1, 2));
  for (int t = 0; t < 2; ++t) {
    for (int w : {1, 0}) {
      one.Send(Push(w, t, {0, 1, 2}));
      Route(s1.Send(Push(w, t, {1, 2})), 1, s0, s1);
      EXPECT_EQ(s1.server.version(), t);  // needs the total from server 0
      Route(s0.Send(Push(w, t, {0})), 0, s0, s1);
    }
    ASSERT_EQ(one.server.version(), t + 1);
    ASSERT_EQ(s0.server.version(), t + 1);
    ASSERT_EQ(s1.server.version(), t + 1);
  }
  const std::vector<float> a = one.Weights(), b0 = s0.Weights(), b1 = s1.Weights();
  for (int i = 0; i < kValues; ++i) EXPECT_EQ(a[i], i < 4 ? b0[i] : b1[i]) << i;
  // By hand: the averaged gradient's norm is above 0.5 in both steps, so it
  // is scaled to norm 0.5.
  std::vector<double> x(kInitial.begin(), kInitial.end());
  for (int t = 0; t < 2; ++t) {
    double ss = 0;
    for (int i = 0; i < kValues; ++i) ss += std::pow((Grad(0, t, i) + Grad(1, t, i)) / 2, 2);
    ASSERT_GT(ss, 0.25);
    for (int i = 0; i < kValues; ++i) {
      x[i] -= 0.1 * (Grad(0, t, i) + Grad(1, t, i)) / 2 * 0.5 / std::sqrt(ss);
    }
  }
  for (int i = 0; i < kValues; ++i) EXPECT_NEAR(a[i], x[i], 1e-6) << i;
}

TEST(ShardServerTest, NormMessagesOnlyWhenClipping) {
  Shard s(Config(Mode::kBsp, 1, 0, 0, 2));
  s.Send(Init(0, 2));
  Message m(pstrain::NORM_PARTIAL, 1, 0, pstrain::SERVER);
  m.header().set_sum_squares(1);
  EXPECT_EQ(s.Send(std::move(m))[0].header.text(),
            "no gradient norms are exchanged (bsp with clip_gradients only, after init)");
  EXPECT_EQ(s.Weights()[0], kInitial[0]);
}

TEST(ShardServerTest, CheckpointBarrierCutsOneGlobalClockAndRestores) {
  testing::TempDir dir;
  ShardConfig c = Config(Mode::kSsp, 2, 3);
  c.snapshot_interval = 2;
  c.snapshot_prefix = dir / "job";
  Shard s(c);
  s.Send(Init(0, 1));
  const std::vector<uint32_t> all = {0, 1, 2};
  s.Send(Push(0, 0, all));
  s.Send(Push(0, 1, all));
  EXPECT_EQ(Count(s.Send(Pull(0, 2)), pstrain::PULL_REPLY), 0);  // within s, but a cut
  EXPECT_EQ(Count(s.Send(Push(1, 0, all)), pstrain::PULL_REPLY), 0);
  auto out = s.Send(Push(1, 1, all));
  const Outgoing* reply = Find(out, pstrain::PULL_REPLY, "w0");
  ASSERT_NE(reply, nullptr);
  const std::string path = dir / "job_iter_2.shard0.state";
  EXPECT_EQ(reply->header.text(), path);
  EXPECT_TRUE(std::filesystem::exists(path));
  const std::vector<float> at_cut = s.Weights();
  s.Send(Push(0, 2, all));  // worker 0 moves on; worker 1's pull still gets the cut's path
  out = s.Send(Pull(1, 2));
  ASSERT_NE(Find(out, pstrain::PULL_REPLY, "w1"), nullptr);
  EXPECT_EQ(Find(out, pstrain::PULL_REPLY, "w1")->header.text(), path);
  EXPECT_EQ(Count(s.Send(Pull(0, 3)), pstrain::PULL_REPLY), 1);
  EXPECT_TRUE(Find(s.Send(Pull(0, 3)), pstrain::PULL_REPLY)->header.text().empty());

  auto restored = ShardServer::Restore(c, path);
  ASSERT_TRUE(restored.ok()) << restored.status().message();
  EXPECT_EQ(restored->version(), 2);
  EXPECT_EQ(restored->clocks().clocks(), (std::vector<int64_t>{2, 2}));
  const ChunkStore& store = *restored->store();
  for (uint32_t id = 0; id < 3; ++id) {
    auto w = store.weights(id);
    for (int64_t i = 0; i < Length(id); ++i) EXPECT_EQ(w[i], at_cut[Offset(id) + i]);
    EXPECT_NE(store.history(id, 0)[0], 0.f);
  }
  EXPECT_EQ(restored->Stats().staleness_histogram_size(),
            s.server.Stats().staleness_histogram_size());
  // The history too: one more identical push gives identical weights.
  Shard again(c);
  again.server = std::move(restored).value();
  Shard fresh(Config(Mode::kSsp, 2, 3));
  // (replay the same run without checkpoints up to the cut)
  fresh.Send(Init(0, 1));
  for (int t = 0; t < 2; ++t) {
    fresh.Send(Push(0, t, all));
  }
  fresh.Send(Push(1, 0, all));
  fresh.Send(Push(1, 1, all));
  again.Send(Push(1, 2, all));
  fresh.Send(Push(1, 2, all));
  EXPECT_EQ(std::memcmp(again.Weights().data(), fresh.Weights().data(), kValues * sizeof(float)),
            0);
  // A restored shard does not cut iteration 2 again.
  EXPECT_TRUE(Find(again.Send(Pull(0, 2)), pstrain::PULL_REPLY)->header.text().empty());
}

TEST(ShardServerTest, RestoreRejectsAStateOfAnotherShardLayout) {
  testing::TempDir dir;
  Shard s(Config(Mode::kBsp, 2));
  s.Send(Init(0, 1));
  const std::string path = dir / "x.state";
  ASSERT_TRUE(s.server.WriteCheckpoint(path).ok());
  EXPECT_EQ(ShardServer::Restore(Config(Mode::kBsp, 2, 0, 0, 2), path).status().message(),
            path + ": the state is for shard 0 of 1, this server is shard 0 of 2");
  EXPECT_EQ(ShardServer::Restore(Config(Mode::kBsp, 3), path).status().message(),
            path + ": the state has clocks of 2 workers, this job has 3");
  ShardConfig adam = Config(Mode::kBsp, 2);
  adam.hyper.type = "Adam";
  EXPECT_EQ(ShardServer::Restore(adam, path).status().message(),
            path + ": the state holds SGD history, this job's solver is Adam");
  EXPECT_TRUE(ShardServer::Restore(Config(Mode::kBsp, 2), path).ok());
  EXPECT_FALSE(ShardServer::Restore(Config(Mode::kBsp, 2), dir / "missing.state").ok());
}

TEST(ShardServerTest, InitTwice) {
  Shard s(Config(Mode::kBsp, 1));
  s.Send(Init(0, 1));
  s.Send(Push(0, 0, {0, 1, 2}));
  const std::vector<float> after_step = s.Weights();
  auto out = s.Send(Init(0, 1, Params(), 100.f));  // worker 0 restarted: same metadata
  ASSERT_EQ(Count(out, pstrain::INIT_ACK), 1);
  EXPECT_EQ(out[0].header.version(), 1);
  EXPECT_EQ(s.Weights(), after_step);
  auto params = Params();
  params[1].set_lr_mult(2);
  out = s.Send(Init(0, 1, params));
  ASSERT_EQ(Count(out, pstrain::ERROR), 1);
  EXPECT_EQ(out[0].header.text(),
            "its parameters differ from those this shard was initialized with");
  EXPECT_EQ(s.Weights(), after_step);
  EXPECT_EQ(s.server.Stats().bad_messages(), 1);
}

TEST(ShardServerTest, InitErrors) {
  Shard s(Config(Mode::kBsp, 2, 0, 1, 2));
  auto out = s.Send(Init(1, 2).Chunk(0, {1, 2, 3, 4}));
  ASSERT_EQ(Count(out, pstrain::ERROR), 1);
  EXPECT_EQ(out[0].header.text(), "chunk 0 is not held by this shard");
  Message missing(pstrain::INIT_PUSH, 0, 0);
  for (const auto& p : Params()) *missing.header().add_params() = p;
  missing.Chunk(1, {5, 6});
  EXPECT_EQ(s.Send(std::move(missing))[0].header.text(), "it carries 1 of the shard's 2 chunks");
  Message stranger(pstrain::INIT_PUSH, 1, 0);
  EXPECT_EQ(s.Send(std::move(stranger))[0].header.text(),
            "only worker 0 sends the initial weights");
  Shard tiny(Config(Mode::kBsp, 1, 0, 3, 4));  // 3 chunks, 4 shards
  EXPECT_EQ(tiny.Send(Init(1, 2))[0].header.text(),
            "shard 3 of 4 would hold no chunk: the net has 3 chunk(s) of at most 16 bytes; use at "
            "most that many server shards or a smaller chunk_bytes");
  EXPECT_FALSE(s.server.initialized());
}

TEST(ShardServerTest, PullBeforeInitWaitsPushBeforeInitFails) {
  Shard s(Config(Mode::kAsp, 1));
  EXPECT_TRUE(s.Send(Pull(0, 0, 5)).empty());
  auto out = s.Send(Push(0, 0, {0}));
  ASSERT_EQ(Count(out, pstrain::ERROR), 1);
  EXPECT_EQ(out[0].header.text(), "push before the init push");
  EXPECT_EQ(out[0].header.request_id(), 0u);
  out = s.Send(Init(0, 1));
  EXPECT_EQ(Count(out, pstrain::INIT_ACK), 1);
  ASSERT_EQ(Count(out, pstrain::PULL_REPLY), 1);
  EXPECT_EQ(Find(out, pstrain::PULL_REPLY)->header.request_id(), 5u);
  EXPECT_EQ(s.server.Stats().bad_messages(), 1);
}

TEST(ShardServerTest, WrongClockPushIsRejectedAndCounted) {
  Shard s(Config(Mode::kSsp, 2, 1));
  s.Send(Init(0, 1));
  auto out = s.Send(Push(0, 1, {0}));
  ASSERT_EQ(Count(out, pstrain::ERROR), 1);
  EXPECT_EQ(out[0].header.text(), "pushed iteration 1 but the worker's clock is 0");
  EXPECT_EQ(out[0].header.request_id(), 100u);
  EXPECT_EQ(s.Weights(), kInitial);
  EXPECT_EQ(s.server.Stats().bad_messages(), 1);
  ASSERT_FALSE(s.logs.empty());
  EXPECT_EQ(s.logs.back(),
            "shard 0: PUSH from worker 0 rejected: pushed iteration 1 but the worker's clock is 0");
  // BSP: a push of iteration t before step t-1 is applied.
  Shard b(Config(Mode::kBsp, 2));
  b.Send(Init(0, 1));
  b.Send(Push(0, 0, {0, 1, 2}));
  EXPECT_EQ(b.Send(Push(0, 1, {0}))[0].header.text(),
            "pushed iteration 1 before step 0 was applied (version 0)");
  // Malformed chunk lists and strangers.
  EXPECT_EQ(s.Send(Push(0, 0, {0}).Chunk(1, {1, 2, 3}))[0].header.text(),
            "chunk 1 has 3 values, expected 2");
  EXPECT_EQ(s.Send(Push(0, 0, {0, 0}))[0].header.text(), "chunk 0 appears twice");
  EXPECT_EQ(s.Send(Push(2, 0, {0}))[0].header.text(), "not from a worker of this job (2 workers)");
  EXPECT_EQ(s.server.Stats().bad_messages(), 4);
  EXPECT_EQ(s.Weights(), kInitial);
}

TEST(ShardServerTest, DuplicateChunksAreDroppedNeverAppliedTwice) {
  ShardConfig c = Config(Mode::kSsp, 1, 0);
  c.hyper.momentum = 0;
  Shard s(c);
  s.Send(Init(0, 1));
  s.Send(Push(0, 0, {0}));
  auto out = s.Send(Push(0, 0, {0, 1}));  // chunk 0 again, chunk 1 new
  EXPECT_EQ(Count(out, pstrain::PUSH_ACK), 1);
  EXPECT_FLOAT_EQ(s.Weights()[0], kInitial[0] - 0.1f * Grad(0, 0, 0));
  EXPECT_FLOAT_EQ(s.Weights()[4], kInitial[4] - 0.1f * Grad(0, 0, 4));
  EXPECT_EQ(s.logs.back(), "shard 0: worker 0's chunk 0 of iteration 0 dropped: received before");
  s.Send(Push(0, 0, {2}));
  EXPECT_EQ(s.server.clocks().clock(0), 1);
  const std::vector<float> done = s.Weights();
  out = s.Send(Push(0, 0, {0, 1, 2}));  // a resend of a complete iteration
  EXPECT_EQ(Count(out, pstrain::PUSH_ACK), 1);
  EXPECT_EQ(s.Weights(), done);
  const pstrain::ShardStats stats = s.server.Stats();
  EXPECT_EQ(stats.duplicates_dropped(), 4);
  EXPECT_EQ(stats.bad_messages(), 0);
  EXPECT_EQ(stats.pushes_applied(), 1);
}

TEST(ShardServerTest, TickWarnsAboutLongWaits) {
  Shard s(Config(Mode::kBsp, 3));
  s.Send(Init(0, 1));
  s.Send(Push(1, 0, {0, 1, 2}));
  s.Send(Push(2, 0, {0, 1}));
  s.Send(Pull(1, 1), kT0);
  s.logs.clear();
  s.server.Tick(kT0 + std::chrono::milliseconds(9999));
  EXPECT_TRUE(s.logs.empty());
  s.server.Tick(kT0 + std::chrono::seconds(10));
  ASSERT_EQ(s.logs.size(), 1u);
  EXPECT_EQ(s.logs[0],
            "shard 0: worker 1's pull for iteration 1 has waited 10.0 s for worker 0 (clock 0), "
            "worker 2 (clock 0)");
  s.server.Tick(kT0 + std::chrono::seconds(15));
  EXPECT_EQ(s.logs.size(), 1u);
  s.Send(Push(0, 0, {0, 1, 2}));
  s.server.Tick(kT0 + std::chrono::seconds(20));
  ASSERT_EQ(s.logs.size(), 2u);
  EXPECT_EQ(s.logs[1],
            "shard 0: worker 1's pull for iteration 1 has waited 20.0 s for worker 2 (clock 0)");
}

TEST(ShardServerTest, PullsOfOneVersionShareTheSnapshotBuffers) {
  Shard s(Config(Mode::kAsp, 2));
  s.Send(Init(0, 1));
  auto a = s.Send(Pull(0, 0));
  auto b = s.Send(Pull(1, 0));
  ASSERT_EQ(a[0].payloads.size(), 3u);
  for (size_t c = 0; c < 3; ++c) EXPECT_EQ(a[0].payloads[c].get(), b[0].payloads[c].get());
  s.Send(Push(0, 0, {1}));
  auto d = s.Send(Pull(0, 1));
  EXPECT_EQ(d[0].payloads[0].get(), a[0].payloads[0].get());  // chunk 0 unchanged
  EXPECT_NE(d[0].payloads[1].get(), a[0].payloads[1].get());
  EXPECT_NE(*d[0].payloads[1], *a[0].payloads[1]);
}

TEST(ShardServerTest, HelloStatsShutdown) {
  Shard s(Config(Mode::kSsp, 2, 2));
  auto out = s.Send(Hello(1, 2));
  ASSERT_EQ(Count(out, pstrain::HELLO_ACK), 1);
  EXPECT_EQ(out[0].peer, "w1");
  EXPECT_EQ(out[0].header.clock(), 0);
  EXPECT_EQ(out[0].header.text(), "ssp");
  EXPECT_EQ(out[0].header.role(), pstrain::SERVER);
  EXPECT_EQ(s.Send(Hello(1, 3))[0].header.text(), "world_size 3 but this job has 2 workers");
  s.Send(Init(0, 1));
  s.Send(Push(1, 0, {0, 1, 2}));
  EXPECT_TRUE(s.Send(Pull(1, 4)).empty());  // deferred for the old peer
  out = s.Send(Hello(1, 2).Peer("w1-restarted"));
  EXPECT_EQ(out[0].header.clock(), 1);
  EXPECT_EQ(s.logs.back(), "shard 0: worker 1 reconnected (peer w1 -> w1-restarted)");
  EXPECT_TRUE(s.Send(Push(0, 0, {0, 1, 2})).size() == 1);  // the stale pull is gone
  out = s.Send(Message(pstrain::STATS, 0, 0, pstrain::CONTROL));
  ASSERT_EQ(Count(out, pstrain::STATS), 1);
  EXPECT_EQ(out[0].header.stats().pushes_applied(), 2);
  EXPECT_EQ(out[0].header.stats().bad_messages(), 1);
  EXPECT_TRUE(s.Send(Message(pstrain::HEARTBEAT, 0, 0)).empty());
  EXPECT_FALSE(s.server.done());
  EXPECT_EQ(Count(s.Send(Message(pstrain::SHUTDOWN, 0, 0, pstrain::CONTROL)), pstrain::SHUTDOWN),
            1);
  EXPECT_TRUE(s.server.done());
}

TEST(ShardServerTest, JobKeyGuardsAgainstStrays) {
  ShardConfig c = Config(Mode::kAsp, 1);
  c.job_key = 42;
  Shard s(c);
  EXPECT_TRUE(s.Send(Hello(0, 1)).empty());
  Message ok = Hello(0, 1);
  ok.header().set_job_key(42);
  auto out = s.Send(std::move(ok));
  ASSERT_EQ(Count(out, pstrain::HELLO_ACK), 1);
  EXPECT_EQ(out[0].header.job_key(), 42u);
  EXPECT_EQ(s.server.Stats().bad_messages(), 1);
}

TEST(ShardServerTest, ConfigValidation) {
  ShardConfig c = Config(Mode::kSsp, 2);
  EXPECT_TRUE(ValidateShardConfig(c).ok());
  c.shard = 1;
  EXPECT_EQ(ValidateShardConfig(c).message(), "shard must be in [0, 1), got 1");
  c = Config(Mode::kSsp, 2);
  c.snapshot_interval = 5;
  EXPECT_EQ(ValidateShardConfig(c).message(),
            "snapshot_prefix must be given when snapshot_interval > 0");
  EXPECT_EQ(ParseMode("ssp").value(), Mode::kSsp);
  EXPECT_EQ(ParseMode("sync").status().message(), "mode \"sync\" is not one of bsp, ssp, asp");
}

}  // namespace
}  // namespace pstrain::server
