// IDX -> LMDB conversion, LmdbReader and Datum validation on small real files.
#include <gtest/gtest.h>

#include <filesystem>

#include "tests/cpp/data_test_util.hpp"
#include "worker/data/datum.hpp"
#include "worker/data/lmdb_reader.hpp"
#include "worker/data/mnist.hpp"

namespace pstrain {
namespace {

using testing::IdxImages;
using testing::IdxLabels;
using testing::TempDir;
using testing::WriteFile;

// 3 images of 2 x 3 with pixels 10*i + j, labels 7, 0, 255.
std::string ThreePixels() {
  std::string p;
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 6; ++j) p += static_cast<char>(10 * i + j);
  }
  return p;
}

void CheckThreeImageLmdb(const std::string& path) {
  auto reader = LmdbReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status().message();
  ASSERT_EQ((*reader)->count(), 3);
  const int labels[] = {7, 0, 255};
  for (int i = 0; i < 3; ++i) {
    LmdbRecord rec;
    ASSERT_TRUE((*reader)->Next(&rec).ok());
    char key[16];
    std::snprintf(key, sizeof(key), "%08d", i);
    EXPECT_EQ(rec.key, key);
    EXPECT_EQ(rec.index, i);
    caffe::Datum d;
    ASSERT_TRUE(ParseDatum(rec.value, "x", &d).ok());
    EXPECT_EQ(d.channels(), 1);
    EXPECT_EQ(d.height(), 2);
    EXPECT_EQ(d.width(), 3);
    EXPECT_EQ(d.label(), labels[i]);
    ASSERT_EQ(d.data().size(), 6u);
    for (int j = 0; j < 6; ++j) EXPECT_EQ(static_cast<uint8_t>(d.data()[j]), 10 * i + j);
    EXPECT_FALSE(d.has_encoded());
    EXPECT_EQ(d.float_data_size(), 0);
  }
}

class MnistTest : public ::testing::TestWithParam<bool> {};

TEST_P(MnistTest, ConvertsAndReadsBack) {
  const bool gz = GetParam();
  TempDir dir;
  WriteFile(dir / "img", IdxImages(3, 2, 3, ThreePixels()), gz);
  WriteFile(dir / "lbl", IdxLabels(std::string("\x07\x00\xff", 3)), gz);
  auto result = ConvertMnistToLmdb(dir / "img", dir / "lbl", dir / "sub/out_lmdb");
  ASSERT_TRUE(result.ok()) << result.status().message();
  EXPECT_EQ(result->records, 3);
  EXPECT_EQ(result->rows, 2);
  EXPECT_EQ(result->cols, 3);
  CheckThreeImageLmdb(dir / "sub/out_lmdb");
  // Nothing but the LMDB is left next to it.
  int entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir / "sub")) {
    (void)e;
    ++entries;
  }
  EXPECT_EQ(entries, 1);

  auto labels = ReadMnistLabels(dir / "lbl");
  ASSERT_TRUE(labels.ok());
  EXPECT_EQ(*labels, (std::vector<uint8_t>{7, 0, 255}));
}

INSTANTIATE_TEST_SUITE_P(PlainAndGzip, MnistTest, ::testing::Values(false, true));

TEST(MnistErrorTest, RefusesToOverwrite) {
  TempDir dir;
  WriteFile(dir / "img", IdxImages(3, 2, 3, ThreePixels()), false);
  WriteFile(dir / "lbl", IdxLabels(std::string("\x07\x00\xff", 3)), false);
  std::filesystem::create_directory(dir / "out");
  auto result = ConvertMnistToLmdb(dir / "img", dir / "lbl", dir / "out");
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().message(),
            dir / "out" + ": already exists (remove it first or choose another path)");
}

TEST(MnistErrorTest, BadInputsNameTheFile) {
  TempDir dir;
  const std::string img = dir / "img";
  const std::string lbl = dir / "lbl";
  const std::string out = dir / "out";
  auto message = [&](const std::string& images, const std::string& labels) {
    auto r = ConvertMnistToLmdb(images, labels, out);
    EXPECT_FALSE(r.ok());
    EXPECT_FALSE(std::filesystem::exists(out));
    return r.ok() ? std::string() : r.status().message();
  };
  WriteFile(lbl, IdxLabels(std::string("\x07\x00\xff", 3)), true);

  EXPECT_EQ(message(dir / "missing", lbl),
            dir / "missing" + ": cannot open (No such file or directory)");
  EXPECT_EQ(message(img, dir / "missing"),
            dir / "missing" + ": cannot open (No such file or directory)");

  WriteFile(img, IdxImages(3, 2, 3, ThreePixels()), true);
  EXPECT_EQ(message(lbl, lbl),
            lbl + ": not an IDX image file (magic number 0x00000801, expected 0x00000803)");
  EXPECT_EQ(message(img, img),
            img + ": not an IDX label file (magic number 0x00000803, expected 0x00000801)");

  WriteFile(img, IdxImages(3, 2, 3, ThreePixels().substr(0, 14)), true);
  EXPECT_EQ(message(img, lbl), img + ": truncated (the file ends inside image 2)");

  WriteFile(img, IdxImages(3, 2, 3, ThreePixels() + "x"), false);
  EXPECT_EQ(message(img, lbl), img + ": unexpected data after the 3 images");

  WriteFile(img, IdxImages(2, 2, 3, ThreePixels().substr(0, 12)), false);
  EXPECT_EQ(message(img, lbl), img + " holds 2 images but " + lbl + " holds 3 labels");

  WriteFile(img, IdxImages(3, 0, 3, ""), false);
  EXPECT_EQ(message(img, lbl), img + ": bad image size 0 x 3");

  WriteFile(img, std::string("\x00\x00", 2), false);
  EXPECT_EQ(message(img, lbl), img + ": truncated (the file ends inside the IDX header)");

  WriteFile(lbl, IdxLabels("\x01\x02"), false);
  WriteFile(lbl, IdxLabels("\x01\x02").substr(0, 9), false);
  EXPECT_EQ(message(img, lbl), lbl + ": truncated (the file ends inside the labels)");
  // Nothing left behind by the failed attempts.
  int entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    (void)e;
    ++entries;
  }
  EXPECT_EQ(entries, 2);
}

TEST(LmdbReaderTest, MissingAndNonLmdbPaths) {
  TempDir dir;
  auto missing = LmdbReader::Open(dir / "nope");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(),
            dir / "nope" + ": cannot open LMDB (No such file or directory)");

  std::filesystem::create_directory(dir / "empty_dir");
  auto empty_dir = LmdbReader::Open(dir / "empty_dir");
  ASSERT_FALSE(empty_dir.ok());
  EXPECT_EQ(empty_dir.status().message(),
            dir / "empty_dir" + ": cannot open LMDB (No such file or directory)");

  std::filesystem::create_directory(dir / "garbage");
  WriteFile(dir / "garbage/data.mdb", std::string(20000, 'x'), false);
  auto garbage = LmdbReader::Open(dir / "garbage");
  ASSERT_FALSE(garbage.ok());
  EXPECT_EQ(garbage.status().message().rfind(dir / "garbage" + ": cannot open LMDB (", 0), 0u)
      << garbage.status().message();
}

TEST(LmdbReaderTest, SequentialWrapAndSeek) {
  TempDir dir;
  testing::WriteCountingLmdb(dir / "db", 5, 1, 1);
  auto opened = LmdbReader::Open(dir / "db");
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  LmdbReader& reader = **opened;
  EXPECT_EQ(reader.count(), 5);
  std::vector<int64_t> seen;
  LmdbRecord rec;
  for (int i = 0; i < 7; ++i) {
    ASSERT_TRUE(reader.Next(&rec).ok());
    seen.push_back(rec.index);
    EXPECT_EQ(std::string(rec.key), std::string("0000000") + static_cast<char>('0' + rec.index));
  }
  EXPECT_EQ(seen, (std::vector<int64_t>{0, 1, 2, 3, 4, 0, 1}));
  for (int64_t k : {3, 1, 12, 4, 0, 5}) {
    ASSERT_TRUE(reader.Seek(k).ok());
    EXPECT_EQ(reader.position(), k % 5);
    ASSERT_TRUE(reader.Next(&rec).ok());
    EXPECT_EQ(rec.index, k % 5);
    caffe::Datum d;
    ASSERT_TRUE(ParseDatum(rec.value, "x", &d).ok());
    EXPECT_EQ(d.label(), k % 5);
  }
  // Two readers of the same LMDB at once.
  auto second = LmdbReader::Open(dir / "db");
  ASSERT_TRUE(second.ok());
  EXPECT_EQ((*second)->count(), 5);
}

TEST(LmdbReaderTest, EmptyLmdb) {
  TempDir dir;
  testing::WriteLmdb(dir / "db", {});
  auto opened = LmdbReader::Open(dir / "db");
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  EXPECT_EQ((*opened)->count(), 0);
  LmdbRecord rec;
  Status s = (*opened)->Next(&rec);
  EXPECT_EQ(s.message(), dir / "db" + ": LMDB is empty");
}

TEST(DatumTest, ValidationErrors) {
  const std::string where = DescribeRecord("db", 4, "00000004");
  EXPECT_EQ(where, "db: record 4 (key '00000004')");
  EXPECT_EQ(DescribeRecord("db", 0, std::string("a\x01'", 3)), "db: record 0 (key 'a\\x01\\x27')");
  auto error = [&](const std::string& value) {
    caffe::Datum d;
    Status s = ParseDatum(value, where, &d);
    EXPECT_FALSE(s.ok());
    return s.message();
  };
  EXPECT_EQ(error("\xff\xff\xff"), where + ": not a valid Datum (corrupt protobuf)");

  caffe::Datum d = testing::MakeDatum(3, 2, 2, std::string(10, 'a'), 1);
  EXPECT_EQ(error(d.SerializeAsString()),
            where + ": channels*height*width = 12 but the record has 10 data bytes");
  d.clear_data();
  for (int i = 0; i < 11; ++i) d.add_float_data(0.5f);
  EXPECT_EQ(error(d.SerializeAsString()),
            where + ": channels*height*width = 12 but the record has 11 float_data values");
  d.clear_float_data();
  EXPECT_EQ(error(d.SerializeAsString()), where + ": the record has no pixel data");
  d.set_encoded(true);
  d.set_data("\xff\xd8 JPEG");
  EXPECT_EQ(error(d.SerializeAsString()), where + ": encoded record: not a PNG or JPEG image");
  d = testing::MakeDatum(0, 2, 2, "", 1);
  EXPECT_EQ(error(d.SerializeAsString()), where + ": invalid Datum shape 0 x 2 x 2");

  caffe::Datum ok;
  d = testing::MakeDatum(3, 2, 2, std::string(12, 'a'), 1);
  EXPECT_TRUE(ParseDatum(d.SerializeAsString(), where, &ok).ok());
  d.clear_data();
  for (int i = 0; i < 12; ++i) d.add_float_data(0.5f);
  EXPECT_TRUE(ParseDatum(d.SerializeAsString(), where, &ok).ok());
}

TEST(FashionMnistTest, ConvertsTheRealTrainingSet) {
  const std::string src = "/usr/share/datasets/fashion-mnist";
  if (!std::filesystem::exists(src + "/train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << src << " not installed";
  }
  TempDir dir;
  auto result = ConvertMnistToLmdb(src + "/train-images-idx3-ubyte.gz",
                                   src + "/train-labels-idx1-ubyte.gz", dir / "train_lmdb");
  ASSERT_TRUE(result.ok()) << result.status().message();
  EXPECT_EQ(result->records, 60000);
  EXPECT_EQ(result->rows, 28);
  EXPECT_EQ(result->cols, 28);
  auto labels = ReadMnistLabels(src + "/train-labels-idx1-ubyte.gz");
  ASSERT_TRUE(labels.ok());
  ASSERT_EQ(labels->size(), 60000u);
  auto reader = LmdbReader::Open(dir / "train_lmdb");
  ASSERT_TRUE(reader.ok());
  EXPECT_EQ((*reader)->count(), 60000);
  for (int64_t k : {0, 59999}) {
    ASSERT_TRUE((*reader)->Seek(k).ok());
    LmdbRecord rec;
    ASSERT_TRUE((*reader)->Next(&rec).ok());
    caffe::Datum d;
    ASSERT_TRUE(ParseDatum(rec.value, "x", &d).ok());
    EXPECT_EQ(d.label(), (*labels)[static_cast<size_t>(k)]) << "record " << k;
    EXPECT_EQ(d.data().size(), 784u);
  }
  // The first Fashion-MNIST training label is 9 (ankle boot).
  EXPECT_EQ((*labels)[0], 9);
}

}  // namespace
}  // namespace pstrain
