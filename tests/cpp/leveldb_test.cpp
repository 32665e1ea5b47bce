// LevelDB data sources: ps-data images --backend leveldb writes the records an
// LMDB of the same list holds, LevelDbReader reads them in key order with
// wrap and seek, a Data layer with backend LEVELDB delivers the batches the
// LMDB one delivers, and LevelDB's refusals (no database, a second open while
// one holds its lock) are named.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/cpp/data_test_util.hpp"
#include "tests/cpp/layer_test_util.hpp"
#include "tests/cpp/net_test_util.hpp"
#include "worker/data/image_codec.hpp"
#include "worker/data/image_set.hpp"
#include "worker/data/leveldb_reader.hpp"
#include "worker/data/leveldb_writer.hpp"
#include "worker/data/lmdb_reader.hpp"

namespace pstrain {
namespace {

using testing::BlobSet;
using testing::MakeLayer;
using testing::TempDir;
using testing::WriteTextFile;

// Three 2 x 2 colour PNGs a, b, c (pixels 0.., 50.., 100..), labels 1, 2, 3.
struct ImageList {
  TempDir dir;
  ImageList() {
    for (int k = 0; k < 3; ++k) {
      Image image;
      image.channels = 3;
      image.height = image.width = 2;
      for (int i = 0; i < 12; ++i) image.pixels.push_back(static_cast<uint8_t>(50 * k + i));
      WriteTextFile(dir / std::string(1, static_cast<char>('a' + k)) + ".png",
                    EncodeImage(image, ImageFormat::kPng).value());
    }
    WriteTextFile(dir / "list.txt", "a.png 1\nb.png 2\nc.png 3\n");
  }
  Status Convert(const std::string& out, const std::string& backend) {
    ImageSetOptions o;
    o.list_file = dir / "list.txt";
    o.root = dir.path();
    o.out = dir / out;
    o.backend = backend;
    return ConvertImageSet(o).status();
  }
};

std::vector<std::pair<std::string, std::string>> ReadAll(RecordReader& reader, int n) {
  std::vector<std::pair<std::string, std::string>> records;
  DbRecord record;
  for (int i = 0; i < n; ++i) {
    EXPECT_TRUE(reader.Next(&record).ok());
    records.emplace_back(std::string(record.key), std::string(record.value));
  }
  return records;
}

TEST(LevelDbTest, PsDataWritesTheRecordsTheLmdbHolds) {
  ImageList list;
  ASSERT_TRUE(list.Convert("lmdb", "lmdb").ok());
  ASSERT_TRUE(list.Convert("ldb", "leveldb").ok());
  auto lmdb = LmdbReader::Open(list.dir / "lmdb");
  auto leveldb = LevelDbReader::Open(list.dir / "ldb");
  ASSERT_TRUE(leveldb.ok()) << leveldb.status().message();
  EXPECT_EQ(leveldb.value()->count(), 3);
  const auto expected = ReadAll(*lmdb.value(), 3);
  EXPECT_EQ(expected[0].first, "00000000_a.png");
  EXPECT_EQ(ReadAll(*leveldb.value(), 4), (std::vector<std::pair<std::string, std::string>>{
                                              expected[0], expected[1], expected[2], expected[0]}));
  ASSERT_TRUE(leveldb.value()->Seek(5).ok());  // 5 mod 3
  EXPECT_EQ(ReadAll(*leveldb.value(), 1)[0], expected[2]);
  ASSERT_TRUE(leveldb.value()->Seek(2).ok());
  ASSERT_TRUE(leveldb.value()->Seek(1).ok());  // backwards
  EXPECT_EQ(ReadAll(*leveldb.value(), 1)[0], expected[1]);
  // An existing output is refused, as for LMDB.
  EXPECT_EQ(list.Convert("ldb", "leveldb").message(),
            list.dir / "ldb" + ": already exists (remove it first or choose another path)");
}

TEST(LevelDbTest, DataLayerReadsLevelDbAsItReadsLmdb) {
  ImageList list;
  ASSERT_TRUE(list.Convert("lmdb", "lmdb").ok());
  ASSERT_TRUE(list.Convert("ldb", "leveldb").ok());
  auto batches = [&](const std::string& source, const std::string& backend) {
    BlobSet top;
    top.Add({});
    top.Add({});
    auto layer = MakeLayer(
        "name: 'd' type: 'Data' top: 'data' top: 'label' transform_param { "
        "scale: 0.5 } data_param { source: '" +
            source + "' batch_size: 2 backend: " + backend + " }",
        Engine::kFast);
    const Status s = layer->SetUp({}, top.vec());
    EXPECT_TRUE(s.ok()) << s.message();
    std::vector<float> out;
    for (int i = 0; i < 2 && s.ok(); ++i) {
      layer->Forward({}, top.vec());
      out.insert(out.end(), top[0]->cpu_data(), top[0]->cpu_data() + top[0]->count());
      out.insert(out.end(), top[1]->cpu_data(), top[1]->cpu_data() + top[1]->count());
    }
    return out;
  };
  const std::vector<float> from_leveldb = batches(list.dir / "ldb", "LEVELDB");
  ASSERT_EQ(from_leveldb.size(), 2u * (24 + 2));
  EXPECT_EQ(from_leveldb, batches(list.dir / "lmdb", "LMDB"));
  // By hand: the first value of the second batch is image c's first pixel, 100 * 0.5;
  // its labels are c's and (around) a's.
  EXPECT_EQ(from_leveldb[26], 50.f);
  EXPECT_EQ(from_leveldb[50], 3.f);
  EXPECT_EQ(from_leveldb[51], 1.f);
}

TEST(LevelDbTest, RefusalsAreNamed) {
  ImageList list;
  auto missing = LevelDbReader::Open(list.dir / "none");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message().rfind(list.dir / "none" + ": cannot open LevelDB (", 0), 0u)
      << missing.status().message();
  ASSERT_TRUE(list.Convert("ldb", "leveldb").ok());
  auto first = LevelDbReader::Open(list.dir / "ldb");
  ASSERT_TRUE(first.ok());
  auto second = LevelDbReader::Open(list.dir / "ldb");  // LevelDB's lock
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find("lock"), std::string::npos) << second.status().message();
  auto empty = BuildLevelDb(list.dir / "empty", [](LevelDbWriter&) { return Status::Ok(); });
  ASSERT_TRUE(empty.ok()) << empty.message();
  BlobSet top;
  top.Add({});
  auto layer = MakeLayer("name: 'd' type: 'Data' top: 'data' data_param { source: '" +
                             list.dir / "empty" + "' batch_size: 2 backend: LEVELDB }",
                         Engine::kFast);
  EXPECT_EQ(layer->SetUp({}, top.vec()).message(), list.dir / "empty" + ": LevelDB is empty");
}

}  // namespace
}  // namespace pstrain
