// The shard's apply path at memory speed: the pool that splits a chunk's
// passes (server/apply_threads.hpp) gives the same bits as one thread for
// every update rule and consistency mode; a compressed push decoded as it is
// summed or applied (server/encoded_gradient.hpp) equals decoding it whole
// first (the socket loop's old way); ps-server --threads is checked.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <mutex>
#include <set>
#include <thread>

#include "common/transport/gradient_codec.hpp"
#include "tests/cpp/shard_state_test_util.hpp"

namespace pstrain::server {
namespace {

using namespace test_support;  // NOLINT: the suite's vocabulary

// One parameter of this many values, one chunk: long enough for 3 parts of
// the pool, odd so that the vector loops have tails.
constexpr int64_t kN = 3 * static_cast<int64_t>(ApplyThreads::kMinPerThread) + 7;
const char* const kRules[] = {"SGD", "Nesterov", "AdaGrad", "RMSProp", "AdaDelta", "Adam"};

struct Mode {
  ConsistencyMode mode;
  int workers;
};
const Mode kModes[] = {{ConsistencyMode::kBsp, 1},
                       {ConsistencyMode::kBsp, 3},
                       {ConsistencyMode::kSsp, 2},
                       {ConsistencyMode::kAsp, 2}};

float Rough(int w, int t, int64_t i) {
  return static_cast<float>(1e-2 * std::sin(1.7 * w + 0.3 * t + 0.0009 * static_cast<double>(i)) *
                            std::pow(10.0, static_cast<double>((w + i) % 3)));
}

struct Trained {
  std::vector<float> weights;
  std::vector<std::vector<float>> history;
};

struct Case {
  std::string rule = "SGD";
  Mode mode{ConsistencyMode::kBsp, 1};
  int threads = 1;
  pstrain::DataType dtype = pstrain::FLOAT32;
  bool decode_first = false;  // hand the shard float32 decoded whole (transport::Decode)
};

// Three steps of every worker's push, then the shard's weights and history.
// Ranks push in the order 0, W-1, ..., 1: bsp's sum takes rank 0 as its
// start, rank W-1 early (set aside), ranks 1.. in turn (added as they come).
Trained Train(const Case& s) {
  ShardConfig config = Config(s.mode.mode, s.mode.workers, /*staleness=*/1);
  config.chunk_bytes = kN * 4;
  config.threads = s.threads;
  config.hyper.type = s.rule;
  config.hyper.base_lr = s.rule == "AdaDelta" ? 1.f : 0.01f;
  config.hyper.momentum = s.rule == "AdaGrad" || s.rule == "RMSProp" ? 0.f : 0.9f;
  config.hyper.weight_decay = 1e-3f;
  EXPECT_TRUE(ValidateShardConfig(config).ok());
  Shard shard(config);
  for (int w = 0; w < s.mode.workers; ++w) shard.Send(Hello(w, s.mode.workers));
  pstrain::ParamMeta meta;
  meta.set_name("w");
  meta.add_shape(kN);
  Message init(pstrain::INIT_PUSH, 0, 0);
  *init.header().add_params() = meta;
  std::vector<float> initial(static_cast<size_t>(kN));
  for (int64_t i = 0; i < kN; ++i) initial[static_cast<size_t>(i)] = Rough(7, 0, i);
  init.Chunk(0, initial);
  EXPECT_EQ(Count(shard.Send(std::move(init)), pstrain::INIT_ACK), 1);
  for (int t = 0; t < 3; ++t) {
    for (int k = 0; k < s.mode.workers; ++k) {
      const int w = k == 0 ? 0 : s.mode.workers - k;
      std::vector<float> grad(static_cast<size_t>(kN));
      for (int64_t i = 0; i < kN; ++i) grad[static_cast<size_t>(i)] = Rough(w, t, i);
      Incoming m;
      m.peer = "w" + std::to_string(w);
      m.header.set_type(pstrain::PUSH);
      m.header.set_role(pstrain::WORKER);
      m.header.set_sender(w);
      m.header.set_clock(t);
      pstrain::ChunkRef* ref = m.header.add_chunks();
      ref->set_id(0);
      ref->set_length(static_cast<uint64_t>(kN));
      std::vector<float> words;
      if (s.dtype == pstrain::FLOAT32) {
        words = grad;
      } else {
        transport::GradientEncoder(s.dtype, grad.size(), 0.25, false).Encode(grad.data(), &words);
        if (s.decode_first) {
          transport::Decode(s.dtype, words.data(), words.size() * 4, grad.size(), grad.data());
          words = grad;
        } else {
          m.header.set_dtype(s.dtype);
          m.payload_bytes.push_back(words.size() * 4);
        }
      }
      m.payloads.push_back(words.data());
      const auto out = shard.server.Handle(m, kT0);
      EXPECT_EQ(Count(out, pstrain::PUSH_ACK), 1) << s.rule;
    }
  }
  EXPECT_EQ(shard.server.version(), 3);
  Trained result;
  const ChunkStore& store = *shard.server.store();
  auto w = store.weights(0);
  result.weights.assign(w.begin(), w.end());
  for (int k = 0; k < store.history_slots(); ++k) {
    auto h = store.history(0, k);
    result.history.emplace_back(h.begin(), h.end());
  }
  return result;
}

// Bit for bit (memcmp: also tells -0 from 0); names the first difference.
void ExpectSameBits(const Trained& a, const Trained& b, const std::string& what) {
  ASSERT_EQ(a.weights.size(), b.weights.size()) << what;
  for (size_t i = 0; i < a.weights.size(); ++i) {
    if (std::memcmp(&a.weights[i], &b.weights[i], 4) != 0) {
      ADD_FAILURE() << what << ": weight " << i << ": " << a.weights[i] << " vs " << b.weights[i];
      return;
    }
  }
  ASSERT_EQ(a.history.size(), b.history.size()) << what;
  for (size_t k = 0; k < a.history.size(); ++k) {
    EXPECT_EQ(std::memcmp(a.history[k].data(), b.history[k].data(), a.history[k].size() * 4), 0)
        << what << ": history " << k;
  }
}

std::string Name(const Case& s) {
  return s.rule + " " + ModeName(s.mode.mode) + " W=" +
         std::to_string(s.mode.workers) + " " + pstrain::DataType_Name(s.dtype);
}

TEST(ApplyThreads, RangesCoverEveryValueOnceOnDistinctThreads) {
  ApplyThreads pool(3);
  EXPECT_EQ(pool.Parts(ApplyThreads::kMinPerThread - 1), 1);
  EXPECT_EQ(pool.Parts(2 * ApplyThreads::kMinPerThread), 2);
  EXPECT_EQ(pool.Parts(100 * ApplyThreads::kMinPerThread), 3);
  const size_t n = static_cast<size_t>(kN);
  std::vector<int> hits(n, 0);
  std::mutex mutex;
  std::set<std::thread::id> ids;
  std::vector<std::pair<size_t, size_t>> ranges(3);
  pool.ForRanges(n, [&](int part, size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) ++hits[i];
    std::lock_guard<std::mutex> lock(mutex);
    ids.insert(std::this_thread::get_id());
    ranges[static_cast<size_t>(part)] = {begin, end};
  });
  EXPECT_EQ(std::count(hits.begin(), hits.end(), 1), kN);
  EXPECT_EQ(ids.size(), 3u);
  // Parts start on 64-byte lines of floats: no two threads write one line.
  for (const auto& [begin, end] : ranges) EXPECT_EQ(begin % 16, 0u);
  EXPECT_EQ(ranges[0].second, 65552u);  // ceil(196615 / 3 / 16) * 16
}

TEST(ShardApply, ParallelApplyEqualsOneThreadForEveryRuleAndMode) {
  for (const char* rule : kRules) {
    for (const Mode& mode : kModes) {
      for (pstrain::DataType dtype : {pstrain::FLOAT32, pstrain::FLOAT16, pstrain::BFLOAT16}) {
        Case one{rule, mode, 1, dtype, false};
        Case three = one;
        three.threads = 3;
        ExpectSameBits(Train(one), Train(three), Name(one));
      }
    }
  }
}

TEST(ShardApply, FusedDecodeEqualsDecodingFirstForEveryRuleAndMode) {
  for (const char* rule : kRules) {
    for (const Mode& mode : kModes) {
      for (pstrain::DataType dtype :
           {pstrain::FLOAT16, pstrain::BFLOAT16, pstrain::TOP_K, pstrain::SIGN_SCALED}) {
        Case fused{rule, mode, 1, dtype, false};
        Case first = fused;
        first.decode_first = true;
        const Trained a = Train(fused);
        ExpectSameBits(a, Train(first), Name(fused));
        // The step moved the weights (the comparison is not of two no-ops).
        EXPECT_NE(a.weights[5], Rough(7, 0, 5)) << Name(fused);
      }
    }
  }
}

// Every finite pattern of a 16-bit `dtype` (those whose exponent bits,
// `exponent`, are not all set), `reps` times, then `one` (1.0), an odd count in
// all (the last word's high half unused): DecodeRange over ranges at odd
// offsets and of odd lengths (as blocks and pool parts cut them) equals
// transport::Decode bit for bit, and no value is taken for non-finite.
void ExpectDecodeRangeEqualsDecodeOnEveryFinitePattern(pstrain::DataType dtype, uint32_t exponent,
                                                       uint16_t one, int reps) {
  std::vector<uint16_t> values;
  for (int rep = 0; rep < reps; ++rep) {
    for (uint32_t v = 0; v < 65536; ++v) {
      if ((v & exponent) != exponent) values.push_back(static_cast<uint16_t>(v));
    }
  }
  values.push_back(one);
  if (values.size() % 2) values.push_back(0);
  const uint64_t n = values.size() - 1;
  std::vector<float> whole(n), part(n, -7.f);
  transport::Decode(dtype, values.data(), values.size() * 2, n, whole.data());
  const EncodedGradient g{dtype, values.data(), values.size() * 2, n};
  for (uint64_t begin = 0; begin < n;) {
    const uint64_t end = std::min(n, begin + 4093);
    DecodeRange(g, begin, end, part.data() + begin);
    begin = end;
  }
  EXPECT_EQ(std::memcmp(whole.data(), part.data(), n * 4), 0) << pstrain::DataType_Name(dtype);
  EXPECT_EQ(part[n - 1], 1.f) << pstrain::DataType_Name(dtype);
  float bad = 0;
  EXPECT_EQ(FirstNonFinite(g, &bad), -1) << pstrain::DataType_Name(dtype);
}

TEST(EncodedGradient, DecodeRangeEqualsTransportDecodeOnEveryFiniteHalf) {
  ExpectDecodeRangeEqualsDecodeOnEveryFinitePattern(pstrain::FLOAT16, 0x7c00u, 0x3c00, 2);
}

TEST(EncodedGradient, DecodeRangeEqualsTransportDecodeOnEveryFiniteBFloat16) {
  // A bf16 push stopped the shard before: DecodeRange knew no BFLOAT16.
  ExpectDecodeRangeEqualsDecodeOnEveryFinitePattern(pstrain::BFLOAT16, 0x7f80u, 0x3f80, 1);
}

TEST(EncodedGradient, FirstNonFiniteFindsEach16BitInfinityAndNaN) {
  // 5000 values (two scan blocks); the bad value in the second block.
  for (pstrain::DataType dtype : {pstrain::FLOAT16, pstrain::BFLOAT16}) {
    const bool half = dtype == pstrain::FLOAT16;
    for (uint16_t special : {half ? uint16_t{0x7c00} : uint16_t{0x7f80},      // +inf
                             half ? uint16_t{0xfc00} : uint16_t{0xff80},      // -inf
                             half ? uint16_t{0x7e00} : uint16_t{0x7fc0}}) {   // NaN
      std::vector<uint16_t> values(5000, half ? uint16_t{0x3c00} : uint16_t{0x3f80});
      values[4321] = special;
      values[4500] = special;
      const EncodedGradient g{dtype, values.data(), values.size() * 2, values.size()};
      float bad = 0;
      EXPECT_EQ(FirstNonFinite(g, &bad), 4321) << pstrain::DataType_Name(dtype) << " " << special;
      EXPECT_FALSE(std::isfinite(bad));
    }
  }
}

TEST(EncodedGradient, TopKAndSignRangesEqualTransportDecode) {
  const size_t n = 1000;
  std::vector<float> grad(n);
  for (size_t i = 0; i < n; ++i) grad[i] = Rough(1, 2, static_cast<int64_t>(i));
  for (pstrain::DataType dtype : {pstrain::TOP_K, pstrain::SIGN_SCALED}) {
    std::vector<float> words;
    transport::GradientEncoder(dtype, n, 0.1, false).Encode(grad.data(), &words);
    std::vector<float> whole(n), part(n, -7.f);
    transport::Decode(dtype, words.data(), words.size() * 4, n, whole.data());
    const EncodedGradient g{dtype, words.data(), words.size() * 4, n};
    for (uint64_t begin = 0; begin < n; begin += 37) {
      DecodeRange(g, begin, std::min<uint64_t>(n, begin + 37), part.data() + begin);
    }
    EXPECT_EQ(whole, part) << pstrain::DataType_Name(dtype);
  }
}

// Worker 0's PUSH at clock 0 of chunk 0 (4 values) in a 16-bit `dtype`, to an
// asp shard of one worker that drops non-finite pushes: what it answers.
std::vector<Outgoing> Push16(Shard& shard, pstrain::DataType dtype, const uint16_t (&values)[4]) {
  Incoming m;
  m.peer = "w0";
  m.header.set_type(pstrain::PUSH);
  m.header.set_role(pstrain::WORKER);
  m.header.set_sender(0);
  m.header.set_clock(0);
  m.header.set_dtype(dtype);
  pstrain::ChunkRef* ref = m.header.add_chunks();
  ref->set_id(0);
  ref->set_length(4);
  std::vector<float> words(2);
  std::memcpy(words.data(), values, 8);
  m.payloads.push_back(words.data());
  m.payload_bytes.push_back(8);
  return shard.server.Handle(m, kT0);
}

ShardConfig DroppingAspShard() {
  ShardConfig config = Config(ConsistencyMode::kAsp, 1);
  config.nonfinite = NonFinitePolicy::kDrop;
  return config;
}

TEST(ShardApply, CompressedPushWithAnInfinityIsRefusedAsItTravelled) {
  Shard shard(DroppingAspShard());
  shard.Send(Hello(0, 1));
  shard.Send(Init(0, 1));
  const std::vector<float> before = shard.Weights();
  // Chunk 0 in fp16: 1, 2, +inf (0x7c00), 4.
  const auto out = Push16(shard, pstrain::FLOAT16, {0x3c00, 0x4000, 0x7c00, 0x4400});
  ASSERT_EQ(Count(out, pstrain::ERROR), 1);
  EXPECT_EQ(Find(out, pstrain::ERROR)->header.text(),
            "PUSH from worker 0 for iteration 0: chunk 0 (parameter 0 'w', value 2) holds inf: "
            "refused");
  EXPECT_EQ(shard.Weights(), before);
}

TEST(ShardApply, Bf16PushIsAppliedAndOneWithANaNIsRefused) {
  Shard shard(DroppingAspShard());
  shard.Send(Hello(0, 1));
  shard.Send(Init(0, 1));
  const std::vector<float> before = shard.Weights();
  // bf16 1, 2, NaN (0x7fc0), 4: refused, nothing applied.
  auto out = Push16(shard, pstrain::BFLOAT16, {0x3f80, 0x4000, 0x7fc0, 0x4080});
  ASSERT_EQ(Count(out, pstrain::ERROR), 1);
  EXPECT_EQ(Find(out, pstrain::ERROR)->header.text(),
            "PUSH from worker 0 for iteration 0: chunk 0 (parameter 0 'w', value 2) holds nan: "
            "refused");
  EXPECT_EQ(shard.Weights(), before);
  // bf16 1, 2, -0.5 (0xbf00), 4: applied as those float32 values (asp, one
  // worker, lr 0.1, momentum's first step: w -= 0.1 g).
  out = Push16(shard, pstrain::BFLOAT16, {0x3f80, 0x4000, 0xbf00, 0x4080});
  EXPECT_EQ(Count(out, pstrain::ERROR), 0);
  const std::vector<float> after = shard.Weights();
  const float g[4] = {1.f, 2.f, -0.5f, 4.f};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_FLOAT_EQ(after[i], before[i] - 0.1f * g[i]) << i;
  }
  for (size_t i = 4; i < after.size(); ++i) EXPECT_EQ(after[i], before[i]) << i;
}

TEST(ServerThreads, FlagTakesWholeNumbersAndAuto) {
  EXPECT_EQ(ParseServerThreads("3").value(), 3);
  EXPECT_EQ(ParseServerThreads("auto").value(), AvailableCores());
  EXPECT_EQ(ParseServerThreads("").value(), AvailableCores());
  EXPECT_GE(AvailableCores(), 1);
  for (const char* bad : {"0", "-2", "1.5", "two", "4x"}) {
    const auto parsed = ParseServerThreads(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().message(),
              std::string("--threads: \"") + bad + "\" is not a whole number >= 1 or auto");
  }
  ShardConfig config = Config(ConsistencyMode::kBsp, 1);
  config.threads = 0;
  EXPECT_EQ(ValidateShardConfig(config).message(), "threads must be at least 1, got 0");
  config.threads = 2;
  EXPECT_TRUE(ValidateShardConfig(config).ok());
}

}  // namespace
}  // namespace pstrain::server
