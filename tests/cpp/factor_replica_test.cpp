// FactorReplica (common/ps/factor_replica.hpp): a worker's replica of a
// broadcast fc weight, stepped from every worker's factors, ends bit for bit
// where real bsp shards (ShardState, fed the dense chunks the shard loop
// rebuilds from the same factors) end: weights and every history slot, after
// every step, for SGD with momentum and weight decay under a step lr policy,
// for Adam, and with iter_size 2. Then the replica's refusals.
#include "common/ps/factor_replica.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "common/ps/averaging.hpp"
#include "common/ps/sufficient_factors.hpp"
#include "tests/cpp/shard_state_test_util.hpp"

namespace pstrain {
namespace {

using server::ShardConfig;
using server::ShardState;
using server::test_support::kT0;
using server::test_support::Message;

// "fc": 5 rows x 7 cols (35 values), "b": 3 values. Chunks of 8 floats: the
// weight's chunks end mid-row, and with 2 shards each holds part of it.
constexpr int64_t kRows = 5;
constexpr int64_t kCols = 7;
constexpr int64_t kBias = 3;
constexpr int kWorkers = 3;
constexpr int kShards = 2;
constexpr int64_t kSamples = 4;  // batch x iter_size

std::vector<pstrain::ParamMeta> Params() {
  pstrain::ParamMeta w, b;
  w.set_name("fc");
  w.add_shape(kRows);
  w.add_shape(kCols);
  w.set_decay_mult(1.5f);
  b.set_name("b");
  b.add_shape(kBias);
  b.set_lr_mult(2.f);
  return {w, b};
}

// Values whose float sums depend on the order of addition.
float Rough(int a, int64_t b, int64_t i) {
  return static_cast<float>(std::sin(1.7 * a + 0.31 * static_cast<double>(b) + 0.9 * i) *
                            std::pow(10.0, (a + i) % 3 - 1));
}

struct Factors {
  std::vector<float> left;   // samples x rows
  std::vector<float> right;  // samples x cols
};

Factors FactorsOf(int w, int64_t t) {
  Factors f;
  for (int64_t i = 0; i < kSamples * kRows; ++i) f.left.push_back(Rough(w, t, i));
  for (int64_t i = 0; i < kSamples * kCols; ++i) f.right.push_back(Rough(w + 7, t, i + 3));
  return f;
}

class FactorReplicaTest : public ::testing::Test {
 protected:
  void Start(const optim::SolverHyper& hyper) {
    hyper_ = hyper;
    auto placement = KeyPlacement::Create({kRows * kCols, kBias}, kShards, 32);
    ASSERT_TRUE(placement.ok());
    placement_ = std::move(placement.value());
    // The test needs the weight on both shards.
    bool on[kShards] = {false, false};
    for (uint32_t id : placement_.param_chunks(0)) on[placement_.chunk(id).shard] = true;
    ASSERT_TRUE(on[0] && on[1]);
    for (int s = 0; s < kShards; ++s) {
      ShardConfig c;
      c.shard = s;
      c.num_shards = kShards;
      c.num_workers = kWorkers;
      c.mode = ConsistencyMode::kBsp;
      c.hyper = hyper;
      c.chunk_bytes = 32;
      shards_.emplace_back(std::move(c));
      Message init(pstrain::INIT_PUSH, 0, 0);
      for (const auto& p : Params()) *init.header().add_params() = p;
      for (uint32_t id : placement_.shard_chunks(s)) init.Chunk(id, Initial(id));
      Handle(s, init);
    }
    const std::vector<optim::ParamHyper> mults = {{1.f, 1.5f}, {2.f, 1.f}};
    auto replica = FactorReplica::Create(placement_, {{0, kCols}}, mults, hyper, kWorkers);
    ASSERT_TRUE(replica.ok()) << replica.status().message();
    replica_.emplace(std::move(replica.value()));
    for (uint32_t id : placement_.param_chunks(0)) replica_->SetWeights(id, Initial(id));
  }

  std::vector<float> Initial(uint32_t id) const {
    std::vector<float> v;
    const Chunk& c = placement_.chunk(id);
    for (int64_t i = c.offset; i < c.offset + c.length; ++i) v.push_back(Rough(c.param, 99, i));
    return v;
  }

  void Handle(int s, Message& m) {
    for (const auto& out : shards_[static_cast<size_t>(s)].Handle(m.get(), kT0)) {
      ASSERT_NE(out.header.type(), pstrain::ERROR) << out.header.text();
    }
  }

  // Step t on the shards: every worker pushes its fc chunks as the shard loop
  // hands them on (rebuilt from its factors) and its bias densely.
  void ShardsStep(int64_t t) {
    for (int s = 0; s < kShards; ++s) {
      for (int w = 0; w < kWorkers; ++w) {
        const Factors f = FactorsOf(w, t);
        std::vector<uint32_t> ids;
        for (uint32_t id : placement_.param_chunks(0)) {
          if (placement_.chunk(id).shard == s) ids.push_back(id);
        }
        const WeightRows span = SpanRows(placement_, ids, kCols);
        std::vector<float> left;  // the push's L: the span's columns
        for (int64_t k = 0; k < kSamples; ++k) {
          left.insert(left.end(), f.left.begin() + k * kRows + span.begin,
                      f.left.begin() + k * kRows + span.end);
        }
        pstrain::Header h;
        for (uint32_t id : ids) {
          pstrain::ChunkRef* ref = h.add_chunks();
          ref->set_id(id);
          ref->set_length(static_cast<uint64_t>(placement_.chunk(id).length));
        }
        pstrain::FactorShape* shape = h.mutable_factors();
        shape->set_samples(kSamples);
        shape->set_row_begin(static_cast<uint32_t>(span.begin));
        shape->set_row_end(static_cast<uint32_t>(span.end));
        shape->set_cols(kCols);
        FactorRebuild rebuild;
        std::vector<float*> rebuilt;
        rebuild.Rebuild(h, left.data(), f.right.data(), placement_, &rebuilt);
        Message push(pstrain::PUSH, w, t);
        for (size_t i = 0; i < ids.size(); ++i) {
          const int64_t n = placement_.chunk(ids[i]).length;
          push.Chunk(ids[i], std::vector<float>(rebuilt[i], rebuilt[i] + n));
        }
        for (uint32_t id : placement_.param_chunks(1)) {
          if (placement_.chunk(id).shard != s) continue;
          std::vector<float> g;
          for (int64_t i = 0; i < placement_.chunk(id).length; ++i) g.push_back(Rough(w, t, i));
          push.Chunk(id, g);
        }
        Handle(s, push);
      }
      ASSERT_EQ(shards_[static_cast<size_t>(s)].version(), t + 1);
    }
  }

  // Step t on the replica: per shard, every worker's factors as relayed.
  void ReplicaStep(int64_t t) {
    std::vector<Factors> all;
    for (int w = 0; w < kWorkers; ++w) all.push_back(FactorsOf(w, t));
    for (int s = 0; s < kShards; ++s) {
      std::vector<uint32_t> ids;
      for (uint32_t id : placement_.param_chunks(0)) {
        if (placement_.chunk(id).shard == s) ids.push_back(id);
      }
      const WeightRows span = SpanRows(placement_, ids, kCols);
      std::vector<std::vector<float>> lefts(kWorkers);
      ShardFactorStep step;
      step.param = 0;
      step.shard = s;
      step.iter = static_cast<int>(t);
      step.scale = AveragingScale(kWorkers, hyper_.iter_size);
      for (int w = 0; w < kWorkers; ++w) {
        for (int64_t k = 0; k < kSamples; ++k) {
          const auto row = all[static_cast<size_t>(w)].left.begin() + k * kRows;
          lefts[static_cast<size_t>(w)].insert(lefts[static_cast<size_t>(w)].end(),
                                              row + span.begin, row + span.end);
        }
        step.workers.push_back(
            {kSamples, lefts[static_cast<size_t>(w)].data(), all[static_cast<size_t>(w)].right.data()});
      }
      const Status status = replica_->Apply(step);
      ASSERT_TRUE(status.ok()) << status.message();
    }
  }

  // Every value of the weight and its history, replica against shard, bit for bit.
  void ExpectIdentical(int64_t t) {
    int compared = 0;
    for (uint32_t id : placement_.param_chunks(0)) {
      const server::ChunkStore& store =
          *shards_[static_cast<size_t>(placement_.chunk(id).shard)].store();
      const auto a = replica_->weights(id);
      const auto b = store.weights(id);
      ASSERT_EQ(a.size(), b.size());
      EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0)
          << "weights of chunk " << id << " after step " << t << ": " << a[0] << " vs " << b[0];
      for (int k = 0; k < replica_->history_slots(); ++k) {
        const auto ha = replica_->history(id, k);
        const auto hb = store.history(id, k);
        EXPECT_EQ(std::memcmp(ha.data(), hb.data(), ha.size() * sizeof(float)), 0)
            << "history " << k << " of chunk " << id << " after step " << t;
      }
      compared += static_cast<int>(a.size());
    }
    EXPECT_EQ(compared, kRows * kCols);
  }

  void Run(int steps) {
    for (int64_t t = 0; t < steps; ++t) {
      ShardsStep(t);
      ReplicaStep(t);
      ExpectIdentical(t);
      if (HasFailure()) return;
    }
    // The steps moved the weights (the comparison is not of untouched values).
    const uint32_t first = placement_.param_chunks(0)[0];
    EXPECT_NE(replica_->weights(first)[0], Initial(first)[0]);
  }

  optim::SolverHyper hyper_;
  KeyPlacement placement_;
  std::vector<ShardState> shards_;
  std::optional<FactorReplica> replica_;
};

optim::SolverHyper Sgd() {
  optim::SolverHyper h;
  h.base_lr = 0.05f;
  h.momentum = 0.9f;
  h.weight_decay = 0.004f;
  h.lr_policy = "step";
  h.gamma = 0.5f;
  h.stepsize = 3;
  return h;
}

TEST_F(FactorReplicaTest, SgdWithMomentumAndDecayIsBitIdenticalToTheShards) {
  Start(Sgd());
  ASSERT_EQ(replica_->history_slots(), 1);
  Run(8);
}

TEST_F(FactorReplicaTest, AdamIsBitIdenticalToTheShards) {
  optim::SolverHyper h = Sgd();
  h.type = "Adam";
  h.lr_policy = "fixed";
  h.base_lr = 0.01f;
  Start(h);
  ASSERT_EQ(replica_->history_slots(), 2);
  Run(6);
}

TEST_F(FactorReplicaTest, IterSizeTwoScalesByTheShardsFactor) {
  optim::SolverHyper h = Sgd();
  h.iter_size = 2;  // the samples are 2 passes' stacked; the shard divides by W x 2
  Start(h);
  Run(4);
}

TEST_F(FactorReplicaTest, RefusesStepsItCannotReproduce) {
  Start(Sgd());
  const Factors f = FactorsOf(0, 0);
  ShardFactorStep step;
  step.param = 0;
  step.shard = 0;
  step.workers.assign(2, WorkerFactors{kSamples, f.left.data(), f.right.data()});
  EXPECT_EQ(replica_->Apply(step).message(), "factors of 2 workers, 3 expected");
  step.workers.push_back({0, f.left.data(), f.right.data()});
  EXPECT_EQ(replica_->Apply(step).message(), "worker 2's factors are missing (0 samples)");
  step.param = 1;
  EXPECT_EQ(replica_->Apply(step).message(), "parameter 1 is not broadcast");
  step.param = 0;
  step.shard = 2;
  EXPECT_EQ(replica_->Apply(step).message(), "parameter 0 has no chunk on server 2");
  // Nothing was applied.
  for (uint32_t id : placement_.param_chunks(0)) {
    const std::vector<float> initial = Initial(id);
    const auto now = replica_->weights(id);
    EXPECT_TRUE(std::equal(now.begin(), now.end(), initial.begin()));
  }

  const std::vector<optim::ParamHyper> mults(2);
  EXPECT_EQ(FactorReplica::Create(placement_, {{0, 6}}, mults, Sgd(), 2).status().message(),
            "FactorReplica: parameter 0 has 35 values, not whole rows of 6");
  EXPECT_EQ(FactorReplica::Create(placement_, {{0, 7}, {0, 7}}, mults, Sgd(), 2)
                .status()
                .message(),
            "FactorReplica: parameter 0 twice");
  EXPECT_EQ(FactorReplica::Create(placement_, {{2, 7}}, mults, Sgd(), 2).status().message(),
            "FactorReplica: parameter 2 of 2");
  EXPECT_EQ(FactorReplica::Create(placement_, {{0, 7}}, {{}}, Sgd(), 2).status().message(),
            "FactorReplica: 1 parameter multipliers for 2 parameters");
}

}  // namespace
}  // namespace pstrain
