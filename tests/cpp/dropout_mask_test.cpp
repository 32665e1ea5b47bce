// Dropout's mask as a function of the sample's place in the data stream: the
// counter-based hash against hand-evaluated values, the layer's mask against
// that function, the same mask for the same position whatever the batch,
// other masks for other positions, numbering without a data source, and, in
// a Net over a real LMDB, W workers of batch B drawing what one worker of
// batch W*B draws, and a resumed net (or one whose data was moved on) what
// the uninterrupted one drew.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "tests/cpp/data_test_util.hpp"
#include "tests/cpp/layer_test_util.hpp"
#include "tests/cpp/net_test_util.hpp"
#include "worker/layers/data_layer.hpp"
#include "worker/layers/dropout_layer.hpp"

namespace pstrain {
namespace {

using testing::BlobSet;
using testing::MakeLayer;

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ULL;

// The values below were worked out by hand (in Python) from the formulas in
// dropout_layer.hpp.
TEST(DropoutMaskTest, HashMatchesHandEvaluatedValues) {
  // splitmix64 from state 0: its first output is the published 0xE220A8397B1DCDAF.
  EXPECT_EQ(DropoutMix(kGolden), 0xE220A8397B1DCDAFULL);
  const uint64_t key = 0x0123456789ABCDEFULL;
  EXPECT_EQ(DropoutSampleKey(key, 0), 0x157A3807A48FAA9DULL);
  EXPECT_EQ(DropoutSampleKey(key, 5), 0x14BC574C2A2B4C72ULL);
  EXPECT_EQ(DropoutSampleKey(key, 5), MixSeed(key, 5));
  EXPECT_EQ(DropoutBits(0x157A3807A48FAA9DULL, 0), 35424464u);
  EXPECT_EQ(DropoutBits(0x14BC574C2A2B4C72ULL, 7), 446289159u);
  EXPECT_EQ(DropoutBits(DropoutSampleKey(key, 1000000), 3), 3968530160u);
  EXPECT_EQ(DropoutThreshold(0.f), 0u);
  EXPECT_EQ(DropoutThreshold(0.5f), 2147483648u);
  EXPECT_EQ(DropoutThreshold(0.3f), 1288490240u);  // 0.3f is 0.300000011920928955078125
}

std::string Proto(float ratio, const std::string& name = "drop") {
  return "name: '" + name +
         "' type: 'Dropout' phase: TRAIN dropout_param { dropout_ratio: " + std::to_string(ratio) +
         " }";
}

// Runs one TRAIN forward of a fresh layer over a {samples, inner} bottom of
// ones, the batch at stream position `first` (-1: no data source), and
// returns the top (the mask times 1).
std::vector<float> Mask(int samples, int inner, int64_t first, const NetContext& context = {},
                        float ratio = 0.5f, const std::string& name = "drop") {
  BlobSet bottom, top;
  Blob* x = bottom.Add({samples, inner});
  top.Add({});
  std::fill(x->mutable_cpu_data(), x->mutable_cpu_data() + x->count(), 1.f);
  auto layer = MakeLayer(Proto(ratio, name), Engine::kReference);
  layer->set_context(context);
  EXPECT_TRUE(layer->SetUp(bottom.vec(), top.vec()).ok());
  layer->set_forward_context(ForwardContext{first});
  layer->Forward(bottom.vec(), top.vec());
  return std::vector<float>(top[0]->cpu_data(), top[0]->cpu_data() + top[0]->count());
}

std::vector<float> Row(const std::vector<float>& mask, int inner, int row) {
  return std::vector<float>(mask.begin() + row * inner, mask.begin() + (row + 1) * inner);
}

TEST(DropoutMaskTest, LayerDrawsTheFunctionOfPositionAndElement) {
  NetContext context;
  context.seed = 5;
  const float ratio = 0.3f;
  const std::vector<float> mask = Mask(3, 40, 100, context, ratio);
  const uint64_t key = MixSeed(5, std::hash<std::string>{}("drop"));
  const float scale = 1.f / (1.f - ratio);
  for (int n = 0; n < 3; ++n) {
    const uint64_t sample_key = DropoutSampleKey(key, 100 + n);
    for (int j = 0; j < 40; ++j) {
      const bool keep = DropoutBits(sample_key, j) >= DropoutThreshold(ratio);
      ASSERT_EQ(mask[n * 40 + j], keep ? scale : 0.f) << n << " " << j;
    }
  }
}

TEST(DropoutMaskTest, SamePositionSameMaskWhateverTheBatch) {
  const int inner = 64;
  const std::vector<float> four = Mask(4, inner, 8);  // positions 8..11
  EXPECT_EQ(Row(Mask(2, inner, 10), inner, 0), Row(four, inner, 2));
  EXPECT_EQ(Row(Mask(2, inner, 10), inner, 1), Row(four, inner, 3));
  EXPECT_EQ(Mask(1, inner, 9), Row(four, inner, 1));
  // Another position, another mask: every pair of rows differs.
  for (int a = 0; a < 4; ++a) {
    for (int b = a + 1; b < 4; ++b) EXPECT_NE(Row(four, inner, a), Row(four, inner, b)) << a << b;
  }
  // The rank and world size do not enter when the position is known.
  NetContext worker;
  worker.rank = 1;
  worker.world_size = 3;
  EXPECT_EQ(Mask(4, inner, 8, worker), four);
}

TEST(DropoutMaskTest, ScaleAndStatistics) {
  for (float ratio : {0.5f, 0.2f, 0.f}) {
    SCOPED_TRACE(ratio);
    const int samples = 500, inner = 200;
    const std::vector<float> mask = Mask(samples, inner, 1000, {}, ratio);
    const float scale = 1.f / (1.f - ratio);
    int64_t kept = 0;
    for (float m : mask) {
      ASSERT_TRUE(m == 0.f || m == scale) << m;
      kept += m != 0.f;
    }
    // 100000 Bernoulli(1 - ratio) draws: the kept fraction within 5 standard deviations.
    EXPECT_NEAR(static_cast<double>(kept) / mask.size(), 1.0 - ratio, 0.008);
    // Each element position across samples is kept about as often: no
    // column is stuck (element 0 of every sample, say).
    for (int j = 0; j < inner; j += 37) {
      int column = 0;
      for (int n = 0; n < samples; ++n) column += mask[n * inner + j] != 0.f;
      EXPECT_NEAR(static_cast<double>(column) / samples, 1.0 - ratio, 0.1) << j;
    }
  }
}

// No data source: batch t = start_iter + forwards so far sits at stream
// position (t * world_size + rank) * N, as a data reader of batch N would.
TEST(DropoutMaskTest, WithoutADataSourceBatchesAreNumberedLikeAReader) {
  const int samples = 3, inner = 20;
  BlobSet bottom, top;
  Blob* x = bottom.Add({samples, inner});
  top.Add({});
  std::fill(x->mutable_cpu_data(), x->mutable_cpu_data() + x->count(), 1.f);
  NetContext context;
  context.rank = 1;
  context.world_size = 2;
  context.start_iter = 4;
  auto layer = MakeLayer(Proto(0.5f), Engine::kReference);
  layer->set_context(context);
  ASSERT_TRUE(layer->SetUp(bottom.vec(), top.vec()).ok());
  for (int64_t t = 4; t < 7; ++t) {
    layer->Forward(bottom.vec(), top.vec());
    const std::vector<float> got(top[0]->cpu_data(), top[0]->cpu_data() + top[0]->count());
    EXPECT_EQ(got, Mask(samples, inner, (t * 2 + 1) * samples)) << t;
  }
}

// --- in a Net, behind a Data layer --------------------------------------------

std::string DropoutNet(const std::string& source, int batch) {
  // mean_value -1: every pixel is at least 1, so a zero output is a dropped element.
  return "name: 'd' layer { name: 'data' type: 'Data' top: 'data' top: 'label' "
         "data_param { source: '" +
         source + "' batch_size: " + std::to_string(batch) +
         " } transform_param { mean_value: -1 } } "
         "layer { name: 'drop' type: 'Dropout' bottom: 'data' top: 'dropped' "
         "dropout_param { dropout_ratio: 0.5 } }";
}

// The 'dropped' blob of `steps` forwards of a TRAIN net with this context,
// the data first moved to step `seek` when it is >= 0 (as a parameter-server
// worker does on resume).
std::vector<std::vector<float>> DropoutTops(const std::string& source, int batch,
                                            const NetContext& context, int steps,
                                            int64_t seek = -1) {
  NetOptions options;
  options.context = context;
  options.context.engine = Engine::kReference;
  auto net = testing::BuildNet(DropoutNet(source, batch), options);
  std::vector<std::vector<float>> tops;
  if (!net) return tops;
  if (seek >= 0) static_cast<DataLayer*>(net->layer_by_name("data"))->SeekToBatch(seek);
  for (int s = 0; s < steps; ++s) {
    net->Forward();
    const Blob* blob = net->blob_by_name("dropped");
    tops.emplace_back(blob->cpu_data(), blob->cpu_data() + blob->count());
  }
  return tops;
}

std::vector<float> Concat(const std::vector<float>& a, const std::vector<float>& b) {
  std::vector<float> both = a;
  both.insert(both.end(), b.begin(), b.end());
  return both;
}

std::vector<bool> Kept(const std::vector<float>& top) {
  std::vector<bool> kept;
  for (float v : top) kept.push_back(v != 0.f);
  return kept;
}

TEST(DropoutMaskTest, TwoWorkersOfBatchTwoDrawWhatOneWorkerOfFourDraws) {
  testing::TempDir dir;
  testing::WriteCountingLmdb(dir / "db", 10, 4, 5);  // 10 records: step 2 wraps around
  const int steps = 3;
  NetContext one, rank0, rank1;
  rank0.world_size = rank1.world_size = 2;
  rank1.rank = 1;
  const auto whole = DropoutTops(dir / "db", 4, one, steps);
  const auto first = DropoutTops(dir / "db", 2, rank0, steps);
  const auto second = DropoutTops(dir / "db", 2, rank1, steps);
  ASSERT_EQ(whole.size(), static_cast<size_t>(steps));
  ASSERT_EQ(first.size(), static_cast<size_t>(steps));
  ASSERT_EQ(second.size(), static_cast<size_t>(steps));
  for (int s = 0; s < steps; ++s) {
    EXPECT_EQ(Concat(first[s], second[s]), whole[s]) << "step " << s;
    // The two workers' masks differ (their data differ too, but no pixel is 0).
    EXPECT_NE(Kept(first[s]), Kept(second[s])) << "step " << s;
  }
  // Step 2 reads records 8, 9, 0, 1 again (the stream wraps), at positions
  // 8..11: masks other than step 0's, which read records 0..3.
  EXPECT_NE(Kept(std::vector<float>(whole[2].begin() + 40, whole[2].end())),
            Kept(std::vector<float>(whole[0].begin(), whole[0].begin() + 40)));
}

TEST(DropoutMaskTest, ResumedNetDrawsWhatTheUninterruptedNetDrew) {
  testing::TempDir dir;
  testing::WriteCountingLmdb(dir / "db", 12, 3, 3);
  NetContext fresh, resumed;
  fresh.rank = resumed.rank = 1;
  fresh.world_size = resumed.world_size = 2;
  resumed.start_iter = 3;
  const auto straight = DropoutTops(dir / "db", 2, fresh, 5);
  const auto after = DropoutTops(dir / "db", 2, resumed, 2);
  ASSERT_EQ(straight.size(), 5u);
  ASSERT_EQ(after.size(), 2u);
  EXPECT_EQ(after[0], straight[3]);
  EXPECT_EQ(after[1], straight[4]);
  // The masks follow the data, however it got to step 3.
  const auto sought = DropoutTops(dir / "db", 2, fresh, 2, /*seek=*/3);
  ASSERT_EQ(sought.size(), 2u);
  EXPECT_EQ(sought[0], straight[3]);
  EXPECT_EQ(sought[1], straight[4]);
}

}  // namespace
}  // namespace pstrain
