// What the fuzz targets (fuzz/) found, pinned with the exact errors: each case
// is the minimal form of an input kept under fuzz/regressions/<target>/ (ctest
// fuzz.replay.<target> replays those files as they are).
#include <gtest/gtest.h>

#include <string>

#include "common/proto_io.hpp"
#include "worker/data/datum.hpp"
#include "worker/net.hpp"

namespace pstrain {
namespace {

// fuzz/regressions/datum/shape_product_overflows_int64: C*H*W of three
// positive ints overflowed int64 (undefined behaviour) before the record's
// size was compared with it.
TEST(FuzzRegressionTest, DatumShapeWhoseProductOverflowsIsRefused) {
  caffe::Datum datum;
  datum.set_channels(1 << 30);
  datum.set_height(1 << 30);
  datum.set_width(1 << 30);
  datum.set_data("x");
  caffe::Datum parsed;
  Status s = ParseDatum(datum.SerializeAsString(), "db: record 4", &parsed);
  EXPECT_EQ(s.message(),
            "db: record 4: invalid Datum shape 1073741824 x 1073741824 x 1073741824 "
            "(more than 2147483647 values)");
  // The largest shape that fits is still compared with the data.
  datum.set_channels(1);
  datum.set_height(65536);
  datum.set_width(32767);
  s = ParseDatum(datum.SerializeAsString(), "db: record 4", &parsed);
  EXPECT_EQ(s.message(),
            "db: record 4: channels*height*width = 2147418112 but the record has 1 data bytes");
}

Result<std::unique_ptr<Net>> Build(const std::string& text, int64_t max_values = kMaxBlobValues) {
  caffe::NetParameter param;
  Status parsed = ParseTextProto(text, "big.prototxt", &param);
  if (!parsed.ok()) return parsed;
  NetOptions options;
  options.source = "big.prototxt";
  options.context.engine = Engine::kReference;
  options.context.max_blob_values = max_values;
  return Net::Create(param, options);
}

// A prototxt asking for a huge blob is refused with the layer and the shape,
// before anything is allocated: tops after each layer's set-up (Input has its
// own 2^31 check; other layers' tops follow from their bottoms and parameters).
TEST(FuzzRegressionTest, TopOverTheLimitIsRefusedWithTheLayer) {
  auto net = Build(R"(layer { name: "in" type: "Input" top: "x"
                            input_param { shape { dim: 4 dim: 8 } } })",
                   16);
  ASSERT_FALSE(net.ok());
  EXPECT_EQ(net.status().message(),
            "big.prototxt: layer 'in' (Input): top 0 of shape 4 8 (32) is larger than the limit "
            "of 16 values");
}

TEST(FuzzRegressionTest, HugeWeightsAreRefusedBeforeTheyAreFilled) {
  auto net = Build(R"(layer { name: "in" type: "Input" top: "x"
                            input_param { shape { dim: 1 dim: 60000 } } }
                     layer { name: "ip" type: "InnerProduct" bottom: "x" top: "y"
                            inner_product_param { num_output: 60000 } })");
  ASSERT_FALSE(net.ok());
  EXPECT_EQ(net.status().message(),
            "big.prototxt: layer 'ip' (InnerProduct): weight_filler: a blob of shape 60000 60000 "
            "(3600000000) is larger than the limit of 2147483647 values");
}

TEST(FuzzRegressionTest, TheLimitIsTheContextsAndNetsBelowItBuild) {
  const std::string text = R"(layer { name: "in" type: "Input" top: "x"
                                     input_param { shape { dim: 4 dim: 8 } } }
                              layer { name: "ip" type: "InnerProduct" bottom: "x" top: "y"
                                     inner_product_param { num_output: 8 } })";
  EXPECT_TRUE(Build(text, 64).ok());
  auto net = Build(text, 63);
  ASSERT_FALSE(net.ok());
  EXPECT_EQ(net.status().message(),
            "big.prototxt: layer 'ip' (InnerProduct): weight_filler: a blob of shape 8 8 (64) is "
            "larger than the limit of 63 values");
}

// fuzz/regressions/net_prototxt/max_pool_kernel_smaller_than_stride_reads_past_input:
// rounding the pooled size up gave a 4th output row whose window (kernel 1,
// stride 2) starts at row 6 of a 6-row input; max pooling read past the input.
TEST(FuzzRegressionTest, PoolingWindowPastTheInputIsRefused) {
  const std::string input = R"(layer { name: "in" type: "Input" top: "x"
                                      input_param { shape { dim: 1 dim: 1 dim: 6 dim: 6 } } })";
  auto net = Build(input + R"(layer { name: "pool" type: "Pooling" bottom: "x" top: "p"
                       pooling_param { pool: MAX kernel_size: 1 stride: 2 } })");
  ASSERT_FALSE(net.ok());
  EXPECT_EQ(net.status().message(),
            "big.prototxt: layer 'pool' (Pooling): kernel 1x1 with stride 2x2 and pad 0x0 puts "
            "the last output's window outside the input 6x6");
  // Rounding up that keeps every window on the input still works: 6 -> 3 rows.
  auto fine = Build(input + R"(layer { name: "pool" type: "Pooling" bottom: "x" top: "p"
                        pooling_param { pool: MAX kernel_size: 3 stride: 2 } })");
  ASSERT_TRUE(fine.ok()) << fine.status().message();
  EXPECT_EQ(fine.value()->blob_by_name("p")->shape(), (std::vector<int>{1, 1, 3, 3}));
}

// fuzz/regressions/net_prototxt/split_of_an_unshaped_input_top: an Input
// without input_param.shape feeding two layers; the inserted Split shared an
// unshaped blob (count 0) with a top of shape {} (count 1): a failed CHECK.
TEST(FuzzRegressionTest, SplitOfAnUnshapedBlobIsRefused) {
  auto net = Build(R"(layer { name: "in" type: "Input" top: "x" }
                     layer { name: "a" type: "ReLU" bottom: "x" top: "a" }
                     layer { name: "b" type: "ReLU" bottom: "x" top: "b" })");
  ASSERT_FALSE(net.ok());
  EXPECT_NE(net.status().message().find(
                "(Split): the bottom has no shape yet (an Input layer without input_param.shape "
                "feeds it)"),
            std::string::npos)
      << net.status().message();
}

}  // namespace
}  // namespace pstrain
