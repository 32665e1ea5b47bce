// The WindowData layer: windows of a 6 x 6 PNG cut out, context-padded,
// warped (warp and square modes) and mirrored as Caffe does, hand-computed;
// mean_value, mean_file and scale; background / foreground counts per batch;
// sharding (two workers draw what one worker with twice the batch draws);
// every bad window file, image and parameter named by file and line.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "common/proto_io.hpp"
#include "tests/cpp/data_test_util.hpp"
#include "tests/cpp/layer_test_util.hpp"
#include "tests/cpp/net_test_util.hpp"
#include "worker/data/image_codec.hpp"
#include "worker/layers/window_data_layer.hpp"

namespace pstrain {
namespace {

using testing::BlobSet;
using testing::MakeLayer;
using testing::TempDir;
using testing::WriteTextFile;

// pixel(c, y, x) = 80 c + a y + b x on a 6 x 6 image (B, G, R planes).
float Pixel(int c, double y, double x, double a, double b) { return 80 * c + a * y + b * x; }

void WriteImage(const std::string& path, int a, int b) {
  Image image;
  image.channels = 3;
  image.height = 6;
  image.width = 6;
  for (int c = 0; c < 3; ++c) {
    for (int y = 0; y < 6; ++y) {
      for (int x = 0; x < 6; ++x) image.pixels.push_back(static_cast<uint8_t>(Pixel(c, y, x, a, b)));
    }
  }
  testing::WritePng(path, image);
}

struct Files {
  TempDir dir;
  std::string windows = dir / "windows.txt";
  std::string image = dir / "img.png";
  explicit Files(int a = 10, int b = 3) { WriteImage(image, a, b); }
  // One image block holding `lines` ("class overlap x1 y1 x2 y2" each).
  void Windows(const std::vector<std::string>& lines) const {
    std::string text = "# 0\nimg.png\n3 6 6\n" + std::to_string(lines.size()) + "\n";
    for (const std::string& line : lines) text += line + "\n";
    WriteTextFile(windows, text);
  }
  std::string Layer(int batch, const std::string& window_extra, const std::string& transform) const {
    return "name: 'win' type: 'WindowData' top: 'data' top: 'label' transform_param { " +
           transform + " } window_data_param { source: '" + windows + "' root_folder: '" +
           dir.path() + "/' batch_size: " + std::to_string(batch) + " " + window_extra + " }";
  }
};

struct LayerRun {
  std::unique_ptr<pstrain::Layer> layer;
  BlobSet top;
  Status setup;
  void Forward() {
    layer->Forward({}, top.vec());
    ASSERT_TRUE(layer->RuntimeStatus().ok()) << layer->RuntimeStatus().message();
  }
  // Item n's value at (c, h, w) of a crop x crop output.
  float At(int n, int c, int h, int w) const {
    const int crop = top[0]->shape()[3];
    return top[0]->cpu_data()[((n * 3 + c) * crop + h) * crop + w];
  }
  float Label(int n) const { return top[1]->cpu_data()[n]; }
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

// Bilinear resize positions of n source pixels onto m: (d + 0.5) * n / m - 0.5.
std::vector<double> Positions(int n, int m) {
  std::vector<double> s;
  for (int d = 0; d < m; ++d) s.push_back((d + 0.5) * n / m - 0.5);
  return s;
}

TEST(WindowDataLayerTest, WarpCopiesTheWindowAtTheCropSize) {
  Files files;
  files.Windows({"3 0.9 1 1 4 4"});
  LayerRun run = StartLayer(files.Layer(1, "fg_fraction: 1", "crop_size: 4"));
  ASSERT_TRUE(run.setup.ok()) << run.setup.message();
  EXPECT_EQ(run.top[0]->shape(), (std::vector<int>{1, 3, 4, 4}));
  EXPECT_EQ(run.top[1]->shape(), (std::vector<int>{1}));
  run.Forward();
  EXPECT_EQ(run.Label(0), 3);
  for (int c = 0; c < 3; ++c) {
    for (int h = 0; h < 4; ++h) {
      for (int w = 0; w < 4; ++w) EXPECT_EQ(run.At(0, c, h, w), Pixel(c, 1 + h, 1 + w, 10, 3));
    }
  }
  EXPECT_EQ(run.At(0, 0, 0, 0), 13);  // 10 * 1 + 3 * 1
}

TEST(WindowDataLayerTest, ContextPadAndSquareWidenAboutTheCentre) {
  Files files;
  // context_pad 1, crop 4: scale 4 / 2 about the centre (3, 3) of the 2 x 2
  // window (2,2)-(3,3): x, y from round(3 - 2) = 1 to round(3 + 2) = 5, 5
  // pixels warped to round(5 * 4/5) = 4, read at 1 + (0.125, 1.375, 2.625, 3.875).
  // square, pad 0: the 4 x 2 window (1,2)-(4,3) widened to half-side 2 about
  // (3, 3): the same 5 x 5 region.
  const std::vector<double> s = Positions(5, 4);
  for (const auto& [window, extra] :
       std::vector<std::pair<std::string, std::string>>{{"2 0.9 2 2 3 3", "context_pad: 1"},
                                                        {"2 0.9 1 2 4 3", "crop_mode: 'square'"}}) {
    files.Windows({window});
    LayerRun run = StartLayer(files.Layer(1, "fg_fraction: 1 " + extra, "crop_size: 4"));
    ASSERT_TRUE(run.setup.ok()) << run.setup.message();
    run.Forward();
    for (int c = 0; c < 3; ++c) {
      for (int h = 0; h < 4; ++h) {
        for (int w = 0; w < 4; ++w) {
          EXPECT_EQ(run.At(0, c, h, w), std::round(Pixel(c, 1 + s[h], 1 + s[w], 10, 3)))
              << extra << " " << c << " " << h << " " << w;
        }
      }
    }
    EXPECT_EQ(run.At(0, 0, 0, 0), 15);  // 11.25 + 3.375 = 14.625
    EXPECT_EQ(run.At(0, 0, 3, 3), 63);  // 48.75 + 14.625 = 63.375
  }
}

TEST(WindowDataLayerTest, PaddingOutsideTheImageStaysZeroAndMirrors) {
  Files files(10, 2);
  // Window (0,0)-(1,1), context_pad 1, crop 4: region -1..3 on both axes, 5
  // wide (scale 4/5); clipped to 0..3, warped to round(4 * 0.8) = 3 pixels
  // after round(1 * 0.8) = 1 of padding. Mirrored, the padding goes right.
  files.Windows({"1 0.9 0 0 1 1"});
  LayerRun run =
      StartLayer(files.Layer(16, "fg_fraction: 1 context_pad: 1", "crop_size: 4 mirror: true"));
  ASSERT_TRUE(run.setup.ok()) << run.setup.message();
  run.Forward();
  const std::vector<double> s = Positions(4, 3);  // 1/6, 3/2, 17/6
  int mirrored = 0;
  for (int n = 0; n < 16; ++n) {
    const bool flip = run.At(n, 0, 1, 3) == 0;  // mirrored: column 3 is padding
    mirrored += flip;
    for (int c = 0; c < 3; ++c) {
      for (int h = 0; h < 4; ++h) {
        for (int w = 0; w < 4; ++w) {
          const int col = flip ? 2 - w : w - 1;  // the warped column shown, or -1 / 3: padding
          const float want = (h == 0 || col < 0 || col > 2)
                                 ? 0.f
                                 : std::round(Pixel(c, s[h - 1], s[col], 10, 2));
          EXPECT_EQ(run.At(n, c, h, w), want) << n << " " << c << " " << h << " " << w;
        }
      }
    }
  }
  EXPECT_EQ(run.At(0, 0, 0, 0), 0);
  EXPECT_GT(mirrored, 0);
  EXPECT_LT(mirrored, 16);
}

TEST(WindowDataLayerTest, MeanValueMeanFileAndScale) {
  Files files;
  files.Windows({"3 0.9 1 1 4 4"});
  // (pixel - mean_value[c]) * window_data_param.scale.
  LayerRun values = StartLayer(
      files.Layer(1, "fg_fraction: 1 scale: 0.5", "crop_size: 4 mean_value: 1 mean_value: 2 "
                                                  "mean_value: 3"));
  ASSERT_TRUE(values.setup.ok()) << values.setup.message();
  values.Forward();
  for (int c = 0; c < 3; ++c) {
    for (int h = 0; h < 4; ++h) {
      for (int w = 0; w < 4; ++w) {
        EXPECT_EQ(values.At(0, c, h, w), (Pixel(c, 1 + h, 1 + w, 10, 3) - (c + 1)) * 0.5f);
      }
    }
  }
  // A 1 x 3 x 7 x 6 mean, read at offset (6 - 4) / 2 = 1 on both axes.
  caffe::BlobProto mean;
  mean.set_num(1);
  mean.set_channels(3);
  mean.set_height(7);
  mean.set_width(6);
  auto mean_at = [](int c, int y, int x) { return 3.f * c + 2.f * y + 0.5f * x; };
  for (int c = 0; c < 3; ++c) {
    for (int y = 0; y < 7; ++y) {
      for (int x = 0; x < 6; ++x) mean.add_data(mean_at(c, y, x));
    }
  }
  ASSERT_TRUE(WriteBinaryProto(mean, files.dir / "mean.binaryproto").ok());
  LayerRun file = StartLayer(files.Layer(
      1, "fg_fraction: 1", "crop_size: 4 mean_file: '" + files.dir / "mean.binaryproto" + "'"));
  ASSERT_TRUE(file.setup.ok()) << file.setup.message();
  file.Forward();
  for (int c = 0; c < 3; ++c) {
    for (int h = 0; h < 4; ++h) {
      for (int w = 0; w < 4; ++w) {
        EXPECT_EQ(file.At(0, c, h, w), Pixel(c, 1 + h, 1 + w, 10, 3) - mean_at(c, h + 1, w + 1));
      }
    }
  }
}

TEST(WindowDataLayerTest, BackgroundThenForegroundInEachBatch) {
  Files files;
  // fg_threshold 0.5 (inclusive), bg_threshold 0.3: two foreground windows,
  // two background ones (label forced to 0), one in between, never drawn.
  files.Windows({"1 0.8 0 0 1 1", "2 0.5 1 1 2 2", "7 0.1 2 2 3 3", "0 0.29 3 3 4 4",
                 "9 0.4 4 4 5 5"});
  LayerRun run = StartLayer(
      files.Layer(8, "fg_fraction: 0.3 bg_threshold: 0.3", "crop_size: 2"));  // int(2.4) = 2
  ASSERT_TRUE(run.setup.ok()) << run.setup.message();
  auto* layer = static_cast<WindowDataLayer*>(run.layer.get());
  EXPECT_EQ(layer->foreground().size(), 2u);
  EXPECT_EQ(layer->background().size(), 2u);
  EXPECT_EQ(layer->foreground_per_batch(), 2);
  std::set<float> fg_labels, bg_corners;
  for (int t = 0; t < 10; ++t) {
    run.Forward();
    for (int n = 0; n < 8; ++n) {
      if (n < 6) {
        EXPECT_EQ(run.Label(n), 0) << t << " " << n;
        bg_corners.insert(run.At(n, 0, 0, 0));
      } else {
        fg_labels.insert(run.Label(n));
      }
    }
  }
  EXPECT_EQ(fg_labels, (std::set<float>{1, 2}));
  EXPECT_EQ(bg_corners, (std::set<float>{26, 39}));  // windows at (2,2) and (3,3)
}

std::vector<std::vector<float>> Items(const LayerRun& run) {
  std::vector<std::vector<float>> items;
  const int per = run.top[0]->count() / run.top[0]->shape()[0];
  for (int n = 0; n < run.top[0]->shape()[0]; ++n) {
    std::vector<float> item(run.top[0]->cpu_data() + n * per, run.top[0]->cpu_data() + (n + 1) * per);
    item.push_back(run.Label(n));
    items.push_back(item);
  }
  return items;
}

TEST(WindowDataLayerTest, TwoWorkersDrawWhatOneWorkerWithTwiceTheBatchDraws) {
  Files files;
  files.Windows({"1 0.8 0 0 1 1", "2 0.9 1 1 2 2", "3 0.7 1 0 2 3", "0 0.1 2 2 3 3",
                 "0 0.2 3 3 5 5", "0 0 0 4 1 5"});
  const std::string extra = "fg_fraction: 0.5";
  NetContext one;
  one.seed = 11;
  LayerRun big = StartLayer(files.Layer(8, extra, "crop_size: 3 mirror: true"), one);
  std::vector<LayerRun> workers;
  for (int rank = 0; rank < 2; ++rank) {
    NetContext c = one;
    c.rank = rank;
    c.world_size = 2;
    workers.push_back(StartLayer(files.Layer(4, extra, "crop_size: 3 mirror: true"), c));
    ASSERT_TRUE(workers.back().setup.ok()) << workers.back().setup.message();
  }
  ASSERT_TRUE(big.setup.ok()) << big.setup.message();
  std::set<std::vector<std::vector<float>>> batches;
  for (int t = 0; t < 4; ++t) {
    big.Forward();
    std::vector<std::vector<float>> want = Items(big), got;
    for (LayerRun& w : workers) {
      w.Forward();
      for (auto& item : Items(w)) got.push_back(item);
    }
    std::sort(want.begin(), want.end());
    std::sort(got.begin(), got.end());
    EXPECT_EQ(got, want) << "step " << t;
    batches.insert(want);
  }
  EXPECT_EQ(batches.size(), 4u);  // the batches differ
  // The same seed draws the same batch; another seed another one.
  LayerRun again = StartLayer(files.Layer(8, extra, "crop_size: 3 mirror: true"), one);
  NetContext other = one;
  other.seed = 12;
  LayerRun reseeded = StartLayer(files.Layer(8, extra, "crop_size: 3 mirror: true"), other);
  again.Forward();
  reseeded.Forward();
  LayerRun first = StartLayer(files.Layer(8, extra, "crop_size: 3 mirror: true"), one);
  first.Forward();
  EXPECT_EQ(Items(again), Items(first));
  EXPECT_NE(Items(reseeded), Items(first));
}

TEST(WindowDataLayerTest, BadWindowFilesImagesAndParamsAreNamed) {
  Files files;
  const std::string dir = files.dir.path() + "/";
  const std::string& f = files.windows;
  auto error = [&](const std::string& text, const std::string& layer_extra = "fg_fraction: 1",
                   const std::string& transform = "crop_size: 4") {
    WriteTextFile(f, text);
    LayerRun run = StartLayer(files.Layer(2, layer_extra, transform));
    EXPECT_FALSE(run.setup.ok()) << text;
    return run.setup.message();
  };
  const std::string head = "# 0\nimg.png\n3 6 6\n";
  EXPECT_EQ(error(head + "1\n1 0.9 0 0 6 5\n"),
            f + ":5: window (x1 y1 x2 y2) = (0 0 6 5) is not inside the 6 x 6 (height x width) "
                "image " + dir + "img.png (corners are inclusive pixel indices from 0)");
  EXPECT_EQ(error(head + "1\n1 0.9 2 0 1 3\n"),
            f + ":5: window (x1 y1 x2 y2) = (2 0 1 3) is not inside the 6 x 6 (height x width) "
                "image " + dir + "img.png (corners are inclusive pixel indices from 0)");
  EXPECT_EQ(error("# 0\nimg.png\n3 6 x\n"), f + ":3: width 'x' is not an integer");
  EXPECT_EQ(error(head + "2\n1 0.9 0 0 1 1\n"), f + ":5: expected class_index, got the end of the file");
  EXPECT_EQ(error(head + "1\n1 high 0 0 1 1\n"), f + ":5: overlap 'high' is not a number");
  EXPECT_EQ(error("% 0\n"), f + ":1: expected '#' to start an image block, got '%'");
  EXPECT_EQ(error(head + "0\n# 2\n"),
            f + ":5: image index 2, expected 1 (images are numbered 0, 1, ... in order)");
  EXPECT_EQ(error("# 0\nimg.png\n1 6 6\n0\n"),
            f + ":3: channels 1: WindowData reads every image as 3 channels (B, G, R), as Caffe");
  EXPECT_EQ(error(head + "1\n0 0.9 0 0 1 1\n"),
            f + ":5: foreground window (overlap 0.900000 >= fg_threshold) has class_index 0; "
                "foreground classes are > 0 (0 is background)");
  EXPECT_EQ(error("\n"), f + ": holds no images");
  EXPECT_EQ(error("# 0\nimg.png\n3 5 6\n0\n"),
            f + ":2: " + dir + "img.png: image is 6 x 6 but the window file says 5 x 6 (height x "
                               "width)");
  EXPECT_EQ(error("# 0\nmissing.png\n3 6 6\n0\n").rfind(f + ":2: " + dir + "missing.png: cannot open", 0),
            0u);
  WriteTextFile(dir + "junk.png", "not an image");
  EXPECT_EQ(error("# 0\njunk.png\n3 6 6\n0\n"),
            f + ":2: " + dir + "junk.png: not a PNG or JPEG image");
  EXPECT_EQ(error(head + "1\n0 0.1 0 0 1 1\n"),
            f + ": no foreground windows (overlap >= fg_threshold 0.500000), but each batch takes 2");
  EXPECT_EQ(error(head + "1\n1 0.9 0 0 1 1\n", "fg_fraction: 0.5"),
            f + ": no background windows (overlap < bg_threshold 0.500000), but each batch takes 1");
  // Parameters.
  EXPECT_EQ(error(head + "0\n", "fg_fraction: 1", ""),
            "WindowData needs transform_param.crop_size (or window_data_param.crop_size) in [1, "
            "65536], got 0");
  EXPECT_EQ(error(head + "0\n", "crop_mode: 'fit'"),
            "window_data_param.crop_mode 'fit': expected warp or square");
  EXPECT_EQ(error(head + "0\n", "context_pad: 2"),
            "window_data_param.context_pad 2 leaves no window in crop 4 (2 * context_pad must be "
            "below it)");
  EXPECT_EQ(error(head + "0\n", "fg_fraction: 1.5"),
            "window_data_param.fg_fraction must be in [0, 1], got 1.500000");
}

TEST(WindowDataLayerTest, AnImageGoneAfterLoadStopsTheRunUnlessCached) {
  Files files;
  files.Windows({"3 0.9 1 1 4 4"});
  LayerRun plain = StartLayer(files.Layer(1, "fg_fraction: 1", "crop_size: 4"));
  LayerRun cached = StartLayer(files.Layer(1, "fg_fraction: 1 cache_images: true", "crop_size: 4"));
  ASSERT_TRUE(plain.setup.ok() && cached.setup.ok());
  ASSERT_EQ(std::remove(files.image.c_str()), 0);
  plain.layer->Forward({}, plain.top.vec());
  EXPECT_EQ(plain.layer->RuntimeStatus().message().rfind(
                files.windows + ":2: " + files.image + ": cannot open", 0),
            0u)
      << plain.layer->RuntimeStatus().message();
  cached.Forward();
  EXPECT_EQ(cached.At(0, 2, 3, 3), Pixel(2, 4, 4, 10, 3));
}

}  // namespace
}  // namespace pstrain
