// DataTransformer against hand-computed values: scale, mean_value, mean_file,
// centre and random crops, mirror, and the order of the random draws.
#include "worker/data/transform.hpp"

#include <gtest/gtest.h>

#include <set>

#include "common/proto_io.hpp"
#include "tests/cpp/data_test_util.hpp"

namespace pstrain {
namespace {

// 2 x 3 x 4 image, pixel (c, h, w) = 100c + 10h + w.
float Pixel(int c, int h, int w) { return static_cast<float>(100 * c + 10 * h + w); }

caffe::Datum Image() {
  std::string bytes;
  for (int c = 0; c < 2; ++c) {
    for (int h = 0; h < 3; ++h) {
      for (int w = 0; w < 4; ++w) bytes += static_cast<char>(Pixel(c, h, w));
    }
  }
  return testing::MakeDatum(2, 3, 4, bytes, 0);
}

caffe::TransformationParameter Param(const std::string& text) {
  caffe::TransformationParameter p;
  Status s = ParseTextProto(text, "test", &p);
  EXPECT_TRUE(s.ok()) << s.message();
  return p;
}

DataTransformer Make(const std::string& text, caffe::Phase phase) {
  auto t = DataTransformer::Create(Param(text), phase, 2, 3, 4);
  EXPECT_TRUE(t.ok()) << t.status().message();
  return std::move(t).value();
}

TEST(TransformTest, ScaleAndMeanValue) {
  DataTransformer t = Make("scale: 0.5 mean_value: 10", caffe::TRAIN);
  EXPECT_EQ(t.OutputShape(5), (std::vector<int>{5, 2, 3, 4}));
  EXPECT_FALSE(t.NeedsRandom());
  std::vector<float> out(24);
  t.Transform(Image(), nullptr, out.data());
  EXPECT_FLOAT_EQ(out[0], -5.f);               // (0 - 10) * 0.5
  EXPECT_FLOAT_EQ(out[23], (123.f - 10) / 2);  // (1, 2, 3)
  EXPECT_FLOAT_EQ(out[12 + 4 + 2], (112.f - 10) / 2);

  DataTransformer per_channel = Make("mean_value: 1 mean_value: 2", caffe::TEST);
  per_channel.Transform(Image(), nullptr, out.data());
  EXPECT_FLOAT_EQ(out[5], 11.f - 1);    // (0, 1, 1)
  EXPECT_FLOAT_EQ(out[12], 100.f - 2);  // (1, 0, 0)

  // float_data records.
  caffe::Datum f = Image();
  f.clear_data();
  for (int i = 0; i < 24; ++i) f.add_float_data(0.25f * static_cast<float>(i));
  Make("scale: 2", caffe::TEST).Transform(f, nullptr, out.data());
  EXPECT_FLOAT_EQ(out[7], 3.5f);
}

TEST(TransformTest, CenterCropInTestPhase) {
  DataTransformer t = Make("crop_size: 2 scale: 2", caffe::TEST);
  EXPECT_EQ(t.OutputShape(1), (std::vector<int>{1, 2, 2, 2}));
  EXPECT_FALSE(t.NeedsRandom());
  std::vector<float> out(8);
  t.Transform(Image(), nullptr, out.data());
  // Offsets: h (3-2)/2 = 0, w (4-2)/2 = 1.
  const float expected[] = {2 * 1, 2 * 2, 2 * 11, 2 * 12, 2 * 101, 2 * 102, 2 * 111, 2 * 112};
  for (int i = 0; i < 8; ++i) EXPECT_FLOAT_EQ(out[i], expected[i]) << i;
}

TEST(TransformTest, MeanFileUsesUncroppedPositions) {
  testing::TempDir dir;
  caffe::BlobProto mean;
  for (int d : {1, 2, 3, 4}) mean.mutable_shape()->add_dim(d);
  for (int i = 0; i < 24; ++i) mean.add_data(0.5f * static_cast<float>(i));
  ASSERT_TRUE(WriteBinaryProto(mean, dir / "mean.binaryproto").ok());
  DataTransformer t =
      Make("crop_size: 2 scale: 0.1 mean_file: '" + dir / "mean.binaryproto" + "'", caffe::TEST);
  std::vector<float> out(8);
  t.Transform(Image(), nullptr, out.data());
  // out (1, 1, 0) reads pixel (1, 1, 1) = 111 and mean index 12 + 4 + 1 = 17.
  EXPECT_FLOAT_EQ(out[6], (111.f - 8.5f) * 0.1f);
  EXPECT_FLOAT_EQ(out[0], (1.f - 0.5f) * 0.1f);

  // Legacy 4-D header, and a 3-axis C x H x W mean, are accepted too.
  caffe::BlobProto legacy = mean;
  legacy.clear_shape();
  legacy.set_num(1);
  legacy.set_channels(2);
  legacy.set_height(3);
  legacy.set_width(4);
  ASSERT_TRUE(WriteBinaryProto(legacy, dir / "legacy.binaryproto").ok());
  EXPECT_TRUE(DataTransformer::Create(Param("mean_file: '" + dir / "legacy.binaryproto" + "'"),
                                      caffe::TEST, 2, 3, 4)
                  .ok());

  caffe::BlobProto wrong;
  for (int d : {1, 3, 3, 4}) wrong.mutable_shape()->add_dim(d);
  for (int i = 0; i < 36; ++i) wrong.add_data(0.f);
  ASSERT_TRUE(WriteBinaryProto(wrong, dir / "wrong.binaryproto").ok());
  auto bad = DataTransformer::Create(Param("mean_file: '" + dir / "wrong.binaryproto" + "'"),
                                     caffe::TEST, 2, 3, 4);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), dir / "wrong.binaryproto" +
                                        ": mean has shape 1 3 3 4 (36); the data is 2 x 3 x 4 "
                                        "(expected 1 x 2 x 3 x 4)");
  auto missing =
      DataTransformer::Create(Param("mean_file: '" + dir / "none" + "'"), caffe::TEST, 2, 3, 4);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(), dir / "none" + ": cannot open (No such file or directory)");
}

TEST(TransformTest, ParameterErrors) {
  auto error = [](const std::string& text) {
    auto t = DataTransformer::Create(Param(text), caffe::TRAIN, 2, 3, 4);
    EXPECT_FALSE(t.ok());
    return t.ok() ? std::string() : t.status().message();
  };
  EXPECT_EQ(error("mean_value: 1 mean_value: 2 mean_value: 3"),
            "transform_param: mean_value has 3 values; the data has 2 channels (give one value "
            "or one per channel)");
  EXPECT_EQ(error("mean_value: 1 mean_file: 'm'"),
            "transform_param: cannot give both mean_file and mean_value");
  EXPECT_EQ(error("crop_size: 4"),
            "transform_param: crop_size 4 is larger than the data (2 x 3 x 4)");
}

TEST(TransformTest, MirrorFlipsWidth) {
  DataTransformer t = Make("mirror: true", caffe::TEST);
  EXPECT_TRUE(t.NeedsRandom());
  std::vector<float> out(24);
  int flipped = 0;
  for (uint64_t seed = 0; seed < 32; ++seed) {
    Rng rng(seed);
    t.Transform(Image(), &rng, out.data());
    Rng replay(seed);
    const bool flip = replay.Below(2) == 1;
    flipped += flip;
    for (int c = 0; c < 2; ++c) {
      for (int h = 0; h < 3; ++h) {
        for (int w = 0; w < 4; ++w) {
          ASSERT_FLOAT_EQ(out[(c * 3 + h) * 4 + w], Pixel(c, h, flip ? 3 - w : w));
        }
      }
    }
  }
  EXPECT_GT(flipped, 0);
  EXPECT_LT(flipped, 32);
}

TEST(TransformTest, RandomCropAndMirrorInTrainPhase) {
  DataTransformer t = Make("crop_size: 2 mirror: true mean_value: 1", caffe::TRAIN);
  EXPECT_TRUE(t.NeedsRandom());
  std::vector<float> out(8);
  std::set<std::pair<int, int>> offsets;
  for (uint64_t seed = 0; seed < 64; ++seed) {
    Rng rng(seed);
    t.Transform(Image(), &rng, out.data());
    // Documented draw order: mirror, then height offset, then width offset.
    Rng replay(seed);
    const bool flip = replay.Below(2) == 1;
    const int h_off = static_cast<int>(replay.Below(2));
    const int w_off = static_cast<int>(replay.Below(3));
    offsets.insert({h_off, w_off});
    for (int c = 0; c < 2; ++c) {
      for (int h = 0; h < 2; ++h) {
        for (int w = 0; w < 2; ++w) {
          const int src_w = w_off + (flip ? 1 - w : w);
          ASSERT_FLOAT_EQ(out[(c * 2 + h) * 2 + w], Pixel(c, h_off + h, src_w) - 1.f)
              << "seed " << seed;
        }
      }
    }
  }
  EXPECT_EQ(offsets.size(), 6u);  // every (h, w) offset occurs
}

}  // namespace
}  // namespace pstrain
