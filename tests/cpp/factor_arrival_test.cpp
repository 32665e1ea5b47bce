// FactorArrival (server/factor_arrival.hpp): a factor PUSH as the shard loop
// hands it to ShardState -- in float32 and in 16 bits: the chunks rebuilt
// from the decoded factors against hand-computed products, the payloads
// float32 with header.dtype FLOAT32 (ShardState would read any other dtype
// as 16-bit chunk encodings), the frames kept as they came in their dtype
// for the relay, the bytes as they travelled.
#include "server/factor_arrival.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string_view>

#include "common/ps/sufficient_factors.hpp"
#include "tests/cpp/transport_test_util.hpp"

namespace pstrain {
namespace {

// w: 2 rows x 3 cols in chunks of 4 values ([0,4) rows 0-1, [4,6) row 1),
// one shard. L (2 samples x 2 rows) = {1 + 2^-11, 2, 3, 4} and R (2 x 3) =
// {5, 6, 7, 8, 9, 10 + 2^-9}: in float32 the product starts at
// (1 + 2^-11) * 5 + 3 * 8 = 29.00244140625; rounded to fp16 (to even: 1, and
// 10) it is {29 33 37 / 42 48 54} exactly.
const std::vector<float> kLeft = {1.f + 0x1p-11f, 2, 3, 4};
const std::vector<float> kRight = {5, 6, 7, 8, 9, 10.f + 0x1p-9f};

transport::InMessage Push(pstrain::DataType dtype) {
  transport::InMessage m;
  m.header = testing::MakeHeader(pstrain::PUSH, 0, 3, {{0, 4}, {1, 2}});
  if (dtype != pstrain::FLOAT32) m.header.set_dtype(dtype);
  pstrain::FactorShape* f = m.header.mutable_factors();
  f->set_samples(2);
  f->set_row_begin(0);
  f->set_row_end(2);
  f->set_cols(3);
  for (const std::vector<float>* values : {&kLeft, &kRight}) {
    std::vector<float> words;
    EncodeFactors(dtype, values->data(), values->size(), &words);
    m.frames.emplace_back(std::string_view(reinterpret_cast<const char*>(words.data()),
                                           words.size() * sizeof(float)));
  }
  m.AlignPayloads();
  return m;
}

std::vector<float> Chunks(const server::Incoming& in) {
  return {in.payloads[0], in.payloads[0] + 4};
}

TEST(FactorArrivalTest, Float32FactorsAreRebuiltAsTheyCame) {
  auto placement = KeyPlacement::Create({6}, 1, 16);
  ASSERT_TRUE(placement.ok());
  const transport::InMessage m = Push(pstrain::FLOAT32);
  server::Incoming in{"w0", m.header, {}, {}};
  server::FactorArrival arrival;
  arrival.Prepare(m, placement.value(), &in);
  ASSERT_EQ(in.payloads.size(), 2u);
  EXPECT_EQ(in.payloads[0][0], 29.00244140625f);
  EXPECT_EQ(in.payloads[1][1], 54.f + 4 * 0x1p-9f);  // 2 * 7 + 4 * (10 + 2^-9)
  EXPECT_EQ(in.wire_bytes, 16 + 24);
  EXPECT_EQ(in.factor_dtype, pstrain::FLOAT32);
  EXPECT_EQ(in.factor_left, m.payload(0));
  EXPECT_EQ(in.header.dtype(), pstrain::FLOAT32);
}

TEST(FactorArrivalTest, SixteenBitFactorsAreDecodedRebuiltAndKeptAsTheyCame) {
  auto placement = KeyPlacement::Create({6}, 1, 16);
  ASSERT_TRUE(placement.ok());
  for (pstrain::DataType dtype : {pstrain::FLOAT16, pstrain::BFLOAT16}) {
    SCOPED_TRACE(pstrain::DataType_Name(dtype));
    const transport::InMessage m = Push(dtype);
    server::Incoming in{"w0", m.header, {}, {}};
    server::FactorArrival arrival;
    arrival.Prepare(m, placement.value(), &in);
    ASSERT_EQ(in.payloads.size(), 2u);
    EXPECT_EQ(Chunks(in), (std::vector<float>{29, 33, 37, 42}));
    EXPECT_EQ(std::vector<float>(in.payloads[1], in.payloads[1] + 2), (std::vector<float>{48, 54}));
    // The rebuilt chunks are float32: ShardState must not decode them again.
    EXPECT_EQ(in.header.dtype(), pstrain::FLOAT32);
    // For the relay: the frames as they came (2 and 3 words), in their dtype.
    EXPECT_EQ(in.factor_dtype, dtype);
    EXPECT_EQ(in.factor_left, m.payload(0));
    EXPECT_EQ(in.factor_right, m.payload(1));
    EXPECT_EQ(in.wire_bytes, 8 + 12);
  }
}

// The rebuild's rows split over the shard's apply threads: the same floats as
// on one thread (each row is the same operations wherever it runs), for a
// weight large enough that the pool uses several parts, chunks that cut rows.
TEST(FactorArrivalTest, ApplyThreadsRebuildTheSameFloats) {
  constexpr int kRows = 600, kCols = 800, kSamples = 8;
  auto placement = KeyPlacement::Create({kRows * kCols}, 1, 1 << 20);
  ASSERT_TRUE(placement.ok());
  ASSERT_EQ(placement.value().chunks().size(), 2u);  // 262144 and 217856 values: row 327 is cut
  std::vector<float> left(kSamples * kRows), right(kSamples * kCols);
  for (size_t i = 0; i < left.size(); ++i) left[i] = std::sin(0.37f * static_cast<float>(i));
  for (size_t i = 0; i < right.size(); ++i) right[i] = std::cos(0.11f * static_cast<float>(i));
  transport::InMessage m;
  m.header = testing::MakeHeader(pstrain::PUSH, 0, 3, {{0, 262144}, {1, 217856}});
  pstrain::FactorShape* f = m.header.mutable_factors();
  f->set_samples(kSamples);
  f->set_row_begin(0);
  f->set_row_end(kRows);
  f->set_cols(kCols);
  for (const std::vector<float>* values : {&left, &right}) {
    m.frames.emplace_back(std::string_view(reinterpret_cast<const char*>(values->data()),
                                           values->size() * sizeof(float)));
  }
  m.AlignPayloads();
  std::vector<std::vector<float>> results;
  for (int threads : {0, 3, 2}) {
    SCOPED_TRACE(threads);
    std::unique_ptr<server::ApplyThreads> pool;
    if (threads > 0) {
      pool = std::make_unique<server::ApplyThreads>(threads);
      ASSERT_EQ(pool->Parts(static_cast<size_t>(328 + 273) * kCols), threads);
    }
    server::Incoming in{"w0", m.header, {}, {}};
    server::FactorArrival arrival;
    arrival.Prepare(m, placement.value(), &in, pool.get());
    ASSERT_EQ(in.payloads.size(), 2u);
    std::vector<float> all(in.payloads[0], in.payloads[0] + 262144);
    all.insert(all.end(), in.payloads[1], in.payloads[1] + 217856);
    results.push_back(all);
    // Spot checks against the definition: the first value and one in the cut row.
    EXPECT_EQ(all[0], [&] {
      float o = left[0] * right[0];
      for (int s = 1; s < kSamples; ++s) o = o + left[s * kRows] * right[s * kCols];
      return o;
    }());
  }
  ASSERT_EQ(results[0].size(), results[1].size());
  EXPECT_EQ(std::memcmp(results[0].data(), results[1].data(), results[0].size() * 4), 0);
  EXPECT_EQ(std::memcmp(results[0].data(), results[2].data(), results[0].size() * 4), 0);
}

}  // namespace
}  // namespace pstrain
