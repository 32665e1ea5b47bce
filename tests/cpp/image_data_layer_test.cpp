// The ImageData layer: PNG files named by a list decoded to Caffe's B, G, R
// planes (or gray), resized, transformed, in list order and around, sharded
// and shuffled as the other data layers; each bad list, file and parameter
// named by list line and file.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "tests/cpp/data_test_util.hpp"
#include "tests/cpp/layer_test_util.hpp"
#include "tests/cpp/net_test_util.hpp"
#include "worker/data/image_codec.hpp"

namespace pstrain {
namespace {

using testing::BlobSet;
using testing::MakeLayer;
using testing::TempDir;
using testing::WritePng;
using testing::WriteTextFile;

// A 3-channel (B, G, R planes) 2 x 3 image whose pixels are base + plane*10 + i.
Image Colour(int base) {
  Image image;
  image.channels = 3;
  image.height = 2;
  image.width = 3;
  for (int c = 0; c < 3; ++c) {
    for (int i = 0; i < 6; ++i) image.pixels.push_back(static_cast<uint8_t>(base + c * 10 + i));
  }
  return image;
}

struct ImageFiles {
  TempDir dir;
  std::string list = dir / "list.txt";
  ImageFiles() {
    WritePng(dir / "a.png", Colour(0));
    WritePng(dir / "b b.png", Colour(100));  // a path with a space
    WritePng(dir / "c.png", Colour(200));
    WriteTextFile(list, "a.png 7\nb b.png 8\n\nc.png 9\n");
  }
  std::string Layer(int batch, const std::string& extra = "") const {
    return "name: 'img' type: 'ImageData' top: 'data' top: 'label' image_data_param { source: '" +
           list + "' root_folder: '" + dir.path() + "/' batch_size: " + std::to_string(batch) +
           " " + extra + " }";
  }
};

struct LayerRun {
  std::unique_ptr<pstrain::Layer> layer;
  BlobSet top;
  Status setup;
};

LayerRun StartLayer(const std::string& text, NetContext context = {}) {
  LayerRun run;
  run.top.Add({});
  run.top.Add({});
  run.layer = MakeLayer(text, Engine::kFast);
  run.layer->set_context(context);
  run.setup = run.layer->SetUp({}, run.top.vec());
  return run;
}

std::vector<float> Labels(LayerRun& run, int forwards) {
  std::vector<float> labels;
  for (int i = 0; i < forwards; ++i) {
    run.layer->Forward({}, run.top.vec());
    EXPECT_TRUE(run.layer->RuntimeStatus().ok()) << run.layer->RuntimeStatus().message();
    labels.insert(labels.end(), run.top[1]->cpu_data(),
                  run.top[1]->cpu_data() + run.top[1]->count());
  }
  return labels;
}

TEST(ImageDataLayerTest, PixelsAndLabelsInListOrderAndAround) {
  ImageFiles files;
  LayerRun run = StartLayer(files.Layer(2));
  ASSERT_TRUE(run.setup.ok()) << run.setup.message();
  EXPECT_EQ(run.top[0]->shape(), (std::vector<int>{2, 3, 2, 3}));
  run.layer->Forward({}, run.top.vec());
  const float* x = run.top[0]->cpu_data();
  for (int c = 0; c < 3; ++c) {
    for (int i = 0; i < 6; ++i) {
      EXPECT_EQ(x[c * 6 + i], c * 10 + i);
      EXPECT_EQ(x[18 + c * 6 + i], 100 + c * 10 + i);
    }
  }
  EXPECT_EQ(run.top[1]->cpu_data()[0], 7);
  EXPECT_EQ(run.top[1]->cpu_data()[1], 8);
  EXPECT_EQ(Labels(run, 2), (std::vector<float>{9, 7, 8, 9}));
  EXPECT_EQ(run.layer->DeliveredFirstSample(), 4);
}

TEST(ImageDataLayerTest, GrayResizeAndTransformByHand) {
  TempDir dir;
  Image image;  // 1 x 2 gray: 0, 100
  image.channels = 1;
  image.height = 1;
  image.width = 2;
  image.pixels = {0, 100};
  WritePng(dir / "g.png", image);
  Image colour;  // one pixel R = 200, G = 100, B = 0
  colour.channels = 3;
  colour.height = colour.width = 1;
  colour.pixels = {0, 100, 200};
  WritePng(dir / "c.png", colour);
  WriteTextFile(dir / "g.txt", dir / "g.png 1\n");
  WriteTextFile(dir / "c.txt", dir / "c.png 1\n");
  // Resized to 1 x 4 at source positions -0.25, 0.25, 0.75, 1.25: 0, 25, 75, 100;
  // is_color replicates gray into B, G, R; then (x - mean_value) * scale.
  LayerRun resized = StartLayer(
      "type: 'ImageData' top: 'data' top: 'label' transform_param { scale: 0.5 "
      "mean_value: 10 } image_data_param { source: '" +
      dir / "g.txt" + "' new_height: 1 new_width: 4 }");
  ASSERT_TRUE(resized.setup.ok()) << resized.setup.message();
  resized.layer->Forward({}, resized.top.vec());
  EXPECT_EQ(resized.top[0]->shape(), (std::vector<int>{1, 3, 1, 4}));
  const std::vector<float> row = {-5, 7.5f, 32.5f, 45};
  for (int c = 0; c < 3; ++c) {
    EXPECT_EQ(std::vector<float>(resized.top[0]->cpu_data() + 4 * c,
                                 resized.top[0]->cpu_data() + 4 * c + 4),
              row);
  }
  // is_color false: 0.299 * 200 + 0.587 * 100 + 0.114 * 0 = 118.5, which OpenCV's
  // fixed point (4899 R + 9617 G + 1868 B + 8192) >> 14 makes 118.
  LayerRun gray =
      StartLayer("type: 'ImageData' top: 'data' top: 'label' image_data_param { source: '" +
                 dir / "c.txt" + "' is_color: false }");
  ASSERT_TRUE(gray.setup.ok()) << gray.setup.message();
  gray.layer->Forward({}, gray.top.vec());
  EXPECT_EQ(gray.top[0]->shape(), (std::vector<int>{1, 1, 1, 1}));
  EXPECT_EQ(gray.top[0]->cpu_data()[0], 118);
}

TEST(ImageDataLayerTest, ShardedShuffledAndSkipped) {
  ImageFiles files;
  NetContext context;
  context.rank = 1;
  context.world_size = 2;
  LayerRun sharded = StartLayer(files.Layer(1), context);
  ASSERT_TRUE(sharded.setup.ok());
  // Rank 1 of 2, batch 1: positions 1, 3, 5.
  EXPECT_EQ(Labels(sharded, 3), (std::vector<float>{8, 7, 9}));

  auto shuffled = [&](uint64_t seed) {
    NetContext c;
    c.seed = seed;
    LayerRun run = StartLayer(files.Layer(3, "shuffle: true"), c);
    EXPECT_TRUE(run.setup.ok());
    return Labels(run, 6);
  };
  const std::vector<float> a = shuffled(5);
  EXPECT_EQ(a, shuffled(5));
  bool reordered = false;
  std::set<std::vector<float>> orders;  // drawn again at every pass
  for (int p = 0; p < 6; ++p) {
    std::vector<float> pass(a.begin() + 3 * p, a.begin() + 3 * p + 3);
    orders.insert(pass);
    reordered = reordered || pass != std::vector<float>{7, 8, 9};
    std::sort(pass.begin(), pass.end());
    EXPECT_EQ(pass, (std::vector<float>{7, 8, 9}));
  }
  EXPECT_TRUE(reordered);
  EXPECT_GT(orders.size(), 1u);

  // rand_skip: the stream starts k lines in, k drawn from the seed in [0, rand_skip).
  std::set<float> starts;
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    NetContext c;
    c.seed = seed;
    LayerRun run = StartLayer(files.Layer(3, "rand_skip: 3"), c);
    ASSERT_TRUE(run.setup.ok());
    const std::vector<float> labels = Labels(run, 1);
    const float s = labels[0];
    EXPECT_EQ(labels, (std::vector<float>{s, s == 9 ? 7.f : s + 1,
                                          s == 7   ? 9.f
                                          : s == 8 ? 7.f
                                                   : 8.f}));
    starts.insert(s);
  }
  EXPECT_EQ(starts, (std::set<float>{7, 8, 9}));
}

TEST(ImageDataLayerTest, BadListsFilesAndParamsAreNamed) {
  ImageFiles files;
  const std::string dir = files.dir.path() + "/";
  auto error = [&](const std::string& text) {
    LayerRun run = StartLayer(text);
    EXPECT_FALSE(run.setup.ok());
    return run.setup.message();
  };
  EXPECT_EQ(error(files.Layer(2, "new_height: 4")),
            "image_data_param.new_height and new_width go together (both > 0 to resize, up to "
            "65536, both 0 not to); got 4 and 0");
  EXPECT_EQ(error(files.Layer(0)), "image_data_param.batch_size must be in [1, 2147483647], got 0");
  WriteTextFile(files.list, "a.png 7\nb.png x\n");
  EXPECT_EQ(error(files.Layer(2)), files.list + ":2: label 'x' is not an integer");
  WriteTextFile(files.list, "missing.png 7\n");
  EXPECT_EQ(error(files.Layer(2)).rfind(files.list + ":1: " + dir + "missing.png: cannot open", 0),
            0u);
  WriteTextFile(dir + "junk.png", "not an image");
  WriteTextFile(files.list, "junk.png 7\n");
  EXPECT_EQ(error(files.Layer(2)), files.list + ":1: " + dir + "junk.png: not a PNG or JPEG image");
  WriteTextFile(files.list, "a.png 7\n");
  // A skip drawn past the list's end is refused (some seed of the first ten draws one).
  std::string skip_error;
  for (uint64_t seed = 1; seed <= 10 && skip_error.empty(); ++seed) {
    NetContext c;
    c.seed = seed;
    skip_error = StartLayer(files.Layer(2, "rand_skip: 5"), c).setup.message();
  }
  EXPECT_TRUE(skip_error.starts_with("image_data_param.rand_skip drew ") &&
              skip_error.ends_with(" lines to skip, but " + files.list + " has only 1"))
      << skip_error;

  // Met at run time: a later image of another size, or one that is gone.
  Image big = Colour(0);
  big.height = 1;
  big.pixels.resize(9);
  WritePng(dir + "big.png", big);
  WriteTextFile(files.list, "a.png 7\nbig.png 8\n");
  LayerRun run = StartLayer(files.Layer(2));
  ASSERT_TRUE(run.setup.ok());
  run.layer->Forward({}, run.top.vec());
  EXPECT_EQ(run.layer->RuntimeStatus().message(),
            files.list + ":2: " + dir +
                "big.png: size 1 x 3 differs from the first image's 2 x 3 (set image_data_param "
                "new_height and new_width)");
}

}  // namespace
}  // namespace pstrain
