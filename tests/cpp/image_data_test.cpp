// PNG/JPEG images: the codec, ps-data images (ConvertImageSet) and ps-data
// mean (ComputeImageMean) on files the test writes, and encoded Datums read
// through the Data layer with a mean_file, against hand-computed pixels.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "common/proto_io.hpp"
#include "tests/cpp/data_test_util.hpp"
#include "tests/cpp/layer_test_util.hpp"
#include "worker/data/datum.hpp"
#include "worker/data/image_codec.hpp"
#include "worker/data/image_set.hpp"
#include "worker/data/lmdb_reader.hpp"
#include "worker/layer_registry.hpp"

namespace pstrain {
namespace {

using testing::TempDir;

// A 3 x h x w image whose B, G, R planes hold 10*y + x + {0, 100, 150}.
Image Ramp(int height, int width) {
  Image image{3, height, width, {}};
  for (int c = 0; c < 3; ++c) {
    for (int y = 0; y < height; ++y) {
      for (int x = 0; x < width; ++x) {
        image.pixels.push_back(static_cast<uint8_t>(10 * y + x + (c == 0 ? 0 : 50 + 50 * c)));
      }
    }
  }
  return image;
}

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string Encode(const Image& image, ImageFormat format) {
  auto encoded = EncodeImage(image, format);
  EXPECT_TRUE(encoded.ok()) << encoded.status().message();
  return encoded.ok() ? encoded.value() : "";
}

std::vector<caffe::Datum> ReadAll(const std::string& lmdb, std::vector<std::string>* keys) {
  auto reader = LmdbReader::Open(lmdb);
  EXPECT_TRUE(reader.ok()) << reader.status().message();
  std::vector<caffe::Datum> out;
  if (!reader.ok()) return out;
  for (int64_t i = 0; i < (*reader)->count(); ++i) {
    LmdbRecord record;
    EXPECT_TRUE((*reader)->Next(&record).ok());
    caffe::Datum datum;
    EXPECT_TRUE(datum.ParseFromArray(record.value.data(), static_cast<int>(record.value.size())));
    out.push_back(datum);
    if (keys != nullptr) keys->emplace_back(record.key);
  }
  return out;
}

TEST(ImageCodecTest, PngRoundTripIsExactAndColourConversionsAreOpenCvs) {
  const Image ramp = Ramp(3, 4);
  const std::string png = Encode(ramp, ImageFormat::kPng);
  EXPECT_EQ(DetectImageFormat(png), ImageFormat::kPng);
  auto back = DecodeImage(png, ImageColor::kNative);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->channels, 3);
  EXPECT_EQ(back->height, 3);
  EXPECT_EQ(back->width, 4);
  EXPECT_EQ(back->pixels, ramp.pixels);

  // Pixel (y 1, x 2): B 12, G 112, R 162 -> 0.114*12 + 0.587*112 + 0.299*162 = 115.55 -> 116
  // (OpenCV's 14-bit weights: (12*1868 + 112*9617 + 162*4899 + 8192) >> 14 = 116).
  auto gray = DecodeImage(png, ImageColor::kGray);
  ASSERT_TRUE(gray.ok());
  ASSERT_EQ(gray->channels, 1);
  EXPECT_EQ(gray->pixels[1 * 4 + 2], 116);
  // Gray PNG decoded as colour: the plane three times.
  const std::string gray_png = Encode(*gray, ImageFormat::kPng);
  auto color = DecodeImage(gray_png, ImageColor::kColor);
  ASSERT_TRUE(color.ok());
  ASSERT_EQ(color->channels, 3);
  for (int c = 0; c < 3; ++c) EXPECT_EQ(color->pixels[c * 12 + 6], 116);
  auto native = DecodeImage(gray_png, ImageColor::kNative);
  ASSERT_TRUE(native.ok());
  EXPECT_EQ(native->channels, 1);
}

TEST(ImageCodecTest, JpegOfAFlatColourDecodesToThatColour) {
  Image flat{3, 16, 16, {}};
  for (uint8_t v : {40, 120, 200}) flat.pixels.insert(flat.pixels.end(), 256, v);  // B G R
  const std::string jpg = Encode(flat, ImageFormat::kJpeg);
  EXPECT_EQ(DetectImageFormat(jpg), ImageFormat::kJpeg);
  auto back = DecodeImage(jpg, ImageColor::kNative);
  ASSERT_TRUE(back.ok()) << back.status().message();
  ASSERT_EQ(back->channels, 3);
  const int expected[] = {40, 120, 200};
  for (int c = 0; c < 3; ++c) {
    for (int p = 0; p < 256; ++p) EXPECT_NEAR(back->pixels[c * 256 + p], expected[c], 2);
  }
  // Y of (B 40, G 120, R 200) = 0.114*40 + 0.587*120 + 0.299*200 = 134.8.
  auto gray = DecodeImage(jpg, ImageColor::kGray);
  ASSERT_TRUE(gray.ok());
  EXPECT_EQ(gray->channels, 1);
  EXPECT_NEAR(gray->pixels[100], 135, 2);
}

TEST(ImageCodecTest, ResizeUsesOpenCvSamplePositions) {
  // 1 x 1 x 2 [0, 100] to width 4: sources -0.25 (clamped), 0.25, 0.75, 1.25 (clamped).
  Image two{1, 1, 2, {0, 100}};
  Image wide = ResizeImage(two, 1, 4);
  EXPECT_EQ(wide.pixels, (std::vector<uint8_t>{0, 25, 75, 100}));
  // 2 x 2 to 1 x 1: the centre, the mean of the four.
  Image four{1, 2, 2, {0, 10, 20, 30}};
  EXPECT_EQ(ResizeImage(four, 1, 1).pixels, (std::vector<uint8_t>{15}));
}

TEST(ImageCodecTest, CorruptBytesAreRefusedWithTheReason) {
  auto none = DecodeImage("hello", ImageColor::kNative);
  EXPECT_EQ(none.status().message(), "not a PNG or JPEG image");
  std::string png = Encode(Ramp(3, 4), ImageFormat::kPng);
  png.resize(png.size() / 2);
  auto cut = DecodeImage(png, ImageColor::kNative);
  ASSERT_FALSE(cut.ok());
  EXPECT_EQ(cut.status().message().rfind("corrupt PNG (", 0), 0u) << cut.status().message();
  auto jpeg = DecodeImage(std::string("\xff\xd8\xff\xe0garbage", 11), ImageColor::kNative);
  ASSERT_FALSE(jpeg.ok());
  EXPECT_EQ(jpeg.status().message().rfind("corrupt JPEG (", 0), 0u) << jpeg.status().message();
}

// Two 2 x 3 PNGs (ramp, ramp + 20) and a list naming them, one path with a space.
struct TwoImages {
  TempDir dir;
  Image a = Ramp(2, 3);
  Image b = Ramp(2, 3);
  TwoImages() {
    for (auto& p : b.pixels) p = static_cast<uint8_t>(p + 20);
    std::filesystem::create_directories(dir / "img/sub dir");
    WriteBytes(dir / "img/a.png", Encode(a, ImageFormat::kPng));
    WriteBytes(dir / "img/sub dir/b.png", Encode(b, ImageFormat::kPng));
    WriteBytes(dir / "list.txt", "a.png 3\r\n\nsub dir/b.png 7\n");
  }
  ImageSetOptions Options(const std::string& out) {
    ImageSetOptions o;
    o.list_file = dir / "list.txt";
    o.root = dir / "img";
    o.out = dir / out;
    return o;
  }
};

TEST(ImageSetTest, RawRecordsHoldThePixelsWithCaffesKeys) {
  TwoImages t;
  auto result = ConvertImageSet(t.Options("raw"));
  ASSERT_TRUE(result.ok()) << result.status().message();
  EXPECT_EQ(result->records, 2);
  std::vector<std::string> keys;
  auto records = ReadAll(t.dir / "raw", &keys);
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(keys, (std::vector<std::string>{"00000000_a.png", "00000001_sub dir/b.png"}));
  EXPECT_EQ(records[0].label(), 3);
  EXPECT_EQ(records[1].label(), 7);
  EXPECT_FALSE(records[0].encoded());
  EXPECT_EQ(records[0].channels(), 3);
  EXPECT_EQ(records[0].height(), 2);
  EXPECT_EQ(records[0].width(), 3);
  EXPECT_EQ(records[0].data(), std::string(t.a.pixels.begin(), t.a.pixels.end()));
  EXPECT_EQ(records[1].data(), std::string(t.b.pixels.begin(), t.b.pixels.end()));
}

TEST(ImageSetTest, EncodedRecordsKeepTheFileOrReencode) {
  TwoImages t;
  ImageSetOptions o = t.Options("enc");
  o.encoded = true;
  ASSERT_TRUE(ConvertImageSet(o).ok());
  auto records = ReadAll(t.dir / "enc", nullptr);
  ASSERT_EQ(records.size(), 2u);
  std::string file;
  ASSERT_TRUE(ReadFileToString(t.dir / "img/a.png", &file).ok());
  EXPECT_TRUE(records[0].encoded());
  EXPECT_EQ(records[0].data(), file);  // the file itself
  EXPECT_FALSE(records[0].has_channels());

  o = t.Options("enc_jpg");
  o.encoded = true;
  o.encode_type = "jpg";
  o.gray = true;
  ASSERT_TRUE(ConvertImageSet(o).ok());
  records = ReadAll(t.dir / "enc_jpg", nullptr);
  EXPECT_EQ(DetectImageFormat(records[1].data()), ImageFormat::kJpeg);
  caffe::Datum decoded;
  ASSERT_TRUE(ParseDatum(records[1].SerializeAsString(), "x", &decoded).ok());
  EXPECT_EQ(DatumShapeString(decoded), "1 x 2 x 3");
}

TEST(ImageSetTest, ResizeGrayAndShuffle) {
  TwoImages t;
  ImageSetOptions o = t.Options("small");
  o.resize_height = 1;
  o.resize_width = 1;
  o.gray = true;
  o.shuffle = true;
  o.seed = 1;
  auto result = ConvertImageSet(o);
  ASSERT_TRUE(result.ok()) << result.status().message();
  EXPECT_EQ(result->channels, 1);
  std::vector<std::string> keys;
  auto records = ReadAll(t.dir / "small", &keys);
  ASSERT_EQ(records.size(), 2u);
  // Gray of the ramp, v = 10y + x: Y = 0.114 v + 0.587 (v + 100) + 0.299 (v + 150) =
  // v + 103.55, in OpenCV's 14-bit weights (16384 v + 1704742 + 8192) >> 14 = v + 104. The 1 x 1
  // resize samples the 2 x 3 image at (y 0.5, x 1.0): half of row 0 and half of row 1 at
  // column 1, (105 + 115) / 2 = 110. Image b is 20 brighter in every channel: 130.
  for (size_t i = 0; i < 2; ++i) {
    const bool is_a = keys[i].find("a.png") != std::string::npos;
    EXPECT_EQ(records[i].data(), std::string(1, static_cast<char>(is_a ? 110 : 130))) << keys[i];
    EXPECT_EQ(records[i].label(), is_a ? 3 : 7);
  }
}

TEST(ImageSetTest, BadListsAndImagesNameTheListLine) {
  TwoImages t;
  auto error = [&](const std::string& list, ImageSetOptions o) {
    WriteBytes(t.dir / "bad.txt", list);
    o.list_file = t.dir / "bad.txt";
    auto result = ConvertImageSet(o);
    EXPECT_FALSE(result.ok());
    EXPECT_FALSE(std::filesystem::exists(o.out)) << o.out;
    return result.ok() ? std::string() : result.status().message();
  };
  const std::string list = t.dir / "bad.txt";
  const ImageSetOptions o = t.Options("out");
  EXPECT_EQ(error("a.png 1\nb.png x\n", o), list + ":2: label 'x' is not an integer");
  EXPECT_EQ(error("a.png\n", o), list + ":1: expected 'PATH LABEL', got 'a.png'");
  EXPECT_EQ(error("\n\n", o), list + ": holds no images");
  EXPECT_EQ(error("a.png 1\nmissing.png 2\n", o)
                .rfind(list + ":2: " + t.dir / "img/missing.png" + ": cannot open", 0),
            0u);
  WriteBytes(t.dir / "img/not_image.png", "text");
  EXPECT_EQ(error("not_image.png 0\n", o),
            list + ":1: " + t.dir / "img/not_image.png" + ": not a PNG or JPEG image");
  WriteBytes(t.dir / "img/big.png", Encode(Ramp(4, 4), ImageFormat::kPng));
  ImageSetOptions check = o;
  check.check_size = true;
  EXPECT_EQ(error("a.png 0\nbig.png 1\n", check),
            list + ":2: " + t.dir / "img/big.png" +
                ": size 4 x 4 differs from the first image's 2 x 3 (--check_size)");
  ImageSetOptions resize = o;
  resize.resize_height = 4;
  EXPECT_EQ(error("a.png 0\n", resize),
            "--resize_height and --resize_width go together (both > 0 to resize, both 0 not "
            "to); got 4 and 0");
  ImageSetOptions rocksdb = o;
  rocksdb.backend = "rocksdb";
  EXPECT_EQ(error("a.png 0\n", rocksdb), "--backend rocksdb: expected lmdb or leveldb");
}

TEST(ImageMeanTest, MeanOfEncodedRecordsIsThePixelMean) {
  TwoImages t;
  ImageSetOptions o = t.Options("enc");
  o.encoded = true;
  ASSERT_TRUE(ConvertImageSet(o).ok());
  auto mean = ComputeImageMean(t.dir / "enc", t.dir / "mean.binaryproto");
  ASSERT_TRUE(mean.ok()) << mean.status().message();
  EXPECT_EQ(mean->records, 2);
  // Per pixel (a + a + 20) / 2 = a + 10; per channel the plane's mean:
  // B: mean(10y + x) over 2 x 3 = 6, +10 = 16; G: +100 -> 116; R: +150 -> 166.
  ASSERT_EQ(mean->channel_means.size(), 3u);
  EXPECT_DOUBLE_EQ(mean->channel_means[0], 16.0);
  EXPECT_DOUBLE_EQ(mean->channel_means[1], 116.0);
  EXPECT_DOUBLE_EQ(mean->channel_means[2], 166.0);
  caffe::BlobProto blob;
  ASSERT_TRUE(ReadBinaryProto(t.dir / "mean.binaryproto", &blob).ok());
  EXPECT_EQ(blob.num(), 1);
  EXPECT_EQ(blob.channels(), 3);
  EXPECT_EQ(blob.height(), 2);
  EXPECT_EQ(blob.width(), 3);
  ASSERT_EQ(blob.data_size(), 18);
  for (int k = 0; k < 18; ++k) EXPECT_FLOAT_EQ(blob.data(k), t.a.pixels[k] + 10.f) << k;
}

TEST(ImageMeanTest, RecordsOfAnotherSizeAreNamed) {
  TwoImages t;
  WriteBytes(t.dir / "img/big.png", Encode(Ramp(4, 4), ImageFormat::kPng));
  WriteBytes(t.dir / "mixed.txt", "a.png 0\nbig.png 1\n");
  ImageSetOptions o = t.Options("mixed");
  o.list_file = t.dir / "mixed.txt";
  ASSERT_TRUE(ConvertImageSet(o).ok());
  auto mean = ComputeImageMean(t.dir / "mixed", t.dir / "m");
  ASSERT_FALSE(mean.ok());
  EXPECT_EQ(mean.status().message().rfind(t.dir / "mixed" + ": record 1 (key '00000001_big.png'): "
                                                            "shape 3 x 4 x 4 differs",
                                          0),
            0u)
      << mean.status().message();
  EXPECT_FALSE(std::filesystem::exists(t.dir / "m"));
}

// The Data layer over encoded records with mean_file and scale gives
// (pixel - mean) * scale; a corrupt encoded record is named by key.
TEST(EncodedDataLayerTest, DecodesAndSubtractsTheMeanFile) {
  TwoImages t;
  ImageSetOptions o = t.Options("enc");
  o.encoded = true;
  ASSERT_TRUE(ConvertImageSet(o).ok());
  ASSERT_TRUE(ComputeImageMean(t.dir / "enc", t.dir / "mean.binaryproto").ok());
  caffe::LayerParameter param = testing::ParseLayer(
      "name: 'data' type: 'Data' top: 'data' top: 'label' data_param { source: '" + t.dir / "enc" +
      "' batch_size: 2 backend: LMDB } transform_param { scale: 0.5 mean_file: '" +
      t.dir / "mean.binaryproto" + "' }");
  param.set_phase(caffe::TEST);
  auto layer = LayerRegistry::Global().Create(param);
  ASSERT_TRUE(layer.ok());
  testing::BlobSet tops;
  tops.Add({1});
  tops.Add({1});
  ASSERT_TRUE((*layer)->SetUp({}, tops.vec()).ok());
  EXPECT_EQ(tops[0]->shape(), (std::vector<int>{2, 3, 2, 3}));
  (*layer)->Forward({}, tops.vec());
  // a - (a + 10) = -10, b - (a + 10) = +10; times 0.5.
  for (int k = 0; k < 18; ++k) {
    EXPECT_FLOAT_EQ(tops[0]->cpu_data()[k], -5.f) << k;
    EXPECT_FLOAT_EQ(tops[0]->cpu_data()[18 + k], 5.f) << k;
  }
  EXPECT_FLOAT_EQ(tops[1]->cpu_data()[0], 3.f);
  EXPECT_FLOAT_EQ(tops[1]->cpu_data()[1], 7.f);

  // A record flagged encoded whose bytes are not an image.
  caffe::Datum bad;
  bad.set_encoded(true);
  bad.set_data("\x89PNG\r\n\x1a\n broken");
  testing::WriteLmdb(t.dir / "bad", {{"00000000_x.png", bad.SerializeAsString()}});
  param.mutable_data_param()->set_source(t.dir / "bad");
  param.mutable_transform_param()->clear_mean_file();
  auto bad_layer = LayerRegistry::Global().Create(param);
  ASSERT_TRUE(bad_layer.ok());
  Status s = (*bad_layer)->SetUp({}, tops.vec());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(
      s.message().rfind(t.dir.path() + "/bad: record 0 (key '00000000_x.png'): encoded record: "
                                       "corrupt PNG (",
                        0),
      0u)
      << s.message();
}

}  // namespace
}  // namespace pstrain
