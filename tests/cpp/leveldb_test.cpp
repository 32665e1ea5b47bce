// LevelDB data sources: ps-data images --backend leveldb writes the records an
// LMDB of the same list holds, LevelDbReader reads them in key order with
// wrap and seek, a Data layer with backend LEVELDB (or none: the format is
// detected) delivers the batches the LMDB one delivers, a backend that names
// the other format is refused, several readers share one database through
// private views that leave the user's folder untouched, and a folder that is
// no LevelDB is refused by name with nothing written into it.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
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
#include "worker/data/record_reader.hpp"

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
      testing::WritePng(dir / std::string(1, static_cast<char>('a' + k)) + ".png", image);
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
            source + "' batch_size: 2 " + (backend.empty() ? "" : "backend: " + backend) + " }",
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
  // No backend: the folder's files decide (Caffe's examples name none and read
  // LevelDB; PSTrain's nets name none and read LMDB).
  EXPECT_EQ(from_leveldb, batches(list.dir / "ldb", ""));
  EXPECT_EQ(from_leveldb, batches(list.dir / "lmdb", ""));
  // By hand: the first value of the second batch is image c's first pixel, 100 * 0.5;
  // its labels are c's and (around) a's.
  EXPECT_EQ(from_leveldb[26], 50.f);
  EXPECT_EQ(from_leveldb[50], 3.f);
  EXPECT_EQ(from_leveldb[51], 1.f);
}

// The file names of `dir` with their sizes and modification times.
std::map<std::string, std::pair<uintmax_t, std::filesystem::file_time_type>> Listing(
    const std::string& dir) {
  std::map<std::string, std::pair<uintmax_t, std::filesystem::file_time_type>> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    files[entry.path().filename().string()] = {entry.is_regular_file() ? entry.file_size() : 0,
                                               entry.last_write_time()};
  }
  return files;
}

std::vector<std::string> Names(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

// Sets TMPDIR for one scope (the views are made under it).
class ScopedTmpDir {
 public:
  explicit ScopedTmpDir(const std::string& dir) {
    if (const char* old = std::getenv("TMPDIR")) old_ = old;
    ::setenv("TMPDIR", dir.c_str(), 1);
  }
  ~ScopedTmpDir() {
    if (old_) {
      ::setenv("TMPDIR", old_->c_str(), 1);
    } else {
      ::unsetenv("TMPDIR");
    }
  }

 private:
  std::optional<std::string> old_;
};

struct stat StatOf(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st;
}

// A LevelDB "ldb" of the list with its records in a table (*.ldb), not only
// in a log as ps-data leaves them (its write buffer is Caffe's 256 MB): the
// files of a reader's view, where LevelDB recovered the log into a table.
// Returns the table's name.
std::string TableName(ImageList& list) {
  EXPECT_TRUE(list.Convert("log_only", "leveldb").ok());
  std::filesystem::create_directory(list.dir / "ldb");
  std::string table;
  {
    auto reader = LevelDbReader::Open(list.dir / "log_only");
    EXPECT_TRUE(reader.ok()) << reader.status().message();
    if (!reader.ok()) return "";
    for (const std::string& name : Names(reader.value()->view())) {
      if (name == "LOCK" || name.rfind("LOG", 0) == 0) continue;
      std::filesystem::copy_file(reader.value()->view() + "/" + name, list.dir / "ldb/" + name);
      if (name.size() > 4 && name.substr(name.size() - 4) == ".ldb") table = name;
    }
  }
  EXPECT_NE(table, "") << "no table in the view";
  return table;
}

TEST(LevelDbTest, ReadersShareOneDatabaseThroughPrivateViews) {
  ImageList list;
  const std::string table = TableName(list);
  std::filesystem::create_directory(list.dir / "tmp");
  ScopedTmpDir tmpdir(list.dir / "tmp");
  const auto before = Listing(list.dir / "ldb");
  ASSERT_EQ(before.count("CURRENT"), 1u);
  auto first = LevelDbReader::Open(list.dir / "ldb");
  auto second = LevelDbReader::Open(list.dir / "ldb");  // at the same time
  ASSERT_TRUE(first.ok()) << first.status().message();
  ASSERT_TRUE(second.ok()) << second.status().message();
  EXPECT_EQ(first.value()->count(), 3);
  EXPECT_EQ(second.value()->count(), 3);
  const auto records = ReadAll(*first.value(), 4);
  EXPECT_EQ(records[0].first, "00000000_a.png");
  EXPECT_EQ(records[3], records[0]);
  EXPECT_EQ(ReadAll(*second.value(), 4), records);
  // Each view is its own mkdtemp folder under TMPDIR, private to this user,
  // and its table is a hard link to the user's.
  const std::string view = first.value()->view();
  EXPECT_EQ(view.rfind(list.dir / "tmp/pstrain-leveldb-", 0), 0u) << view;
  EXPECT_NE(view, second.value()->view());
  EXPECT_EQ(StatOf(view).st_mode & 0777, 0700u);
  EXPECT_EQ(StatOf(view + "/" + table).st_ino, StatOf(list.dir / "ldb/" + table).st_ino);
  EXPECT_EQ(Names(list.dir / "tmp").size(), 2u);
  // A train and a test net of one process on the same source.
  auto data_layer = [&] {
    auto layer = MakeLayer("name: 'd' type: 'Data' top: 'data' data_param { source: '" +
                               list.dir / "ldb" + "' batch_size: 2 }",
                           Engine::kFast);
    BlobSet top;
    top.Add({});
    const Status s = layer->SetUp({}, top.vec());
    EXPECT_TRUE(s.ok()) << s.message();
    return layer;
  };
  {
    auto train = data_layer();
    auto test = data_layer();
  }
  first.value().reset();
  second.value().reset();
  EXPECT_EQ(Names(list.dir / "tmp"), std::vector<std::string>{});  // every view deleted
  EXPECT_EQ(Listing(list.dir / "ldb"), before);                    // the user's folder as it was
  EXPECT_EQ(StatOf(list.dir / "ldb/" + table).st_nlink, 1u);
}

TEST(LevelDbTest, ATempDirOnAnotherFilesystemGetsCopies) {
  ImageList list;
  const std::string table = TableName(list);
  char pattern[] = "/dev/shm/pstrain_leveldb_test.XXXXXX";
  if (!std::filesystem::is_directory("/dev/shm") || ::mkdtemp(pattern) == nullptr) {
    GTEST_SKIP() << "no /dev/shm";
  }
  const std::string shm = pattern;
  if (StatOf(shm).st_dev == StatOf(list.dir / "ldb").st_dev) {
    std::filesystem::remove_all(shm);
    GTEST_SKIP() << "/dev/shm is on the test folder's filesystem";
  }
  {
    ScopedTmpDir tmpdir(shm);
    auto reader = LevelDbReader::Open(list.dir / "ldb");  // link() fails with EXDEV
    ASSERT_TRUE(reader.ok()) << reader.status().message();
    EXPECT_EQ(reader.value()->count(), 3);
    EXPECT_EQ(ReadAll(*reader.value(), 1)[0].first, "00000000_a.png");
    const std::string copy = reader.value()->view() + "/" + table;
    EXPECT_EQ(StatOf(copy).st_size, StatOf(list.dir / "ldb/" + table).st_size);
    EXPECT_EQ(StatOf(list.dir / "ldb/" + table).st_nlink, 1u);
    reader.value().reset();
    EXPECT_EQ(Names(shm), std::vector<std::string>{});
  }
  std::filesystem::remove_all(shm);
}

TEST(LevelDbTest, ABackendNamingTheOtherFormatIsRefused) {
  ImageList list;
  ASSERT_TRUE(list.Convert("lmdb", "lmdb").ok());
  ASSERT_TRUE(list.Convert("ldb", "leveldb").ok());
  auto error = [&](const std::string& source, const std::string& backend) {
    BlobSet top;
    top.Add({});
    auto layer = MakeLayer("name: 'd' type: 'Data' top: 'data' data_param { source: '" + source +
                               "' batch_size: 2 backend: " + backend + " }",
                           Engine::kFast);
    return layer->SetUp({}, top.vec()).message();
  };
  EXPECT_EQ(error(list.dir / "ldb", "LMDB"),
            list.dir / "ldb" +
                ": is a LevelDB, not an LMDB (it holds CURRENT and no data.mdb): set "
                "data_param.backend: LEVELDB, or leave it unset to detect the format");
  EXPECT_EQ(error(list.dir / "lmdb", "LEVELDB"),
            list.dir / "lmdb" +
                ": is an LMDB, not a LevelDB (it holds data.mdb and no CURRENT): set "
                "data_param.backend: LMDB, or leave it unset to detect the format");
  EXPECT_EQ(DetectDbBackend(list.dir / "ldb"), DbBackend::kLevelDb);
  EXPECT_EQ(DetectDbBackend(list.dir / "lmdb"), DbBackend::kLmdb);
  EXPECT_EQ(DetectDbBackend(list.dir / "none"), DbBackend::kLmdb);  // the LMDB reader's error
}

TEST(LevelDbTest, RefusalsAreNamedAndWriteNothing) {
  ImageList list;
  auto missing = LevelDbReader::Open(list.dir / "none");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(), list.dir / "none" + ": does not exist");
  EXPECT_FALSE(std::filesystem::exists(list.dir / "none"));
  std::filesystem::create_directory(list.dir / "plain");
  WriteTextFile(list.dir / "plain/notes.txt", "not a database");
  auto plain = LevelDbReader::Open(list.dir / "plain");
  ASSERT_FALSE(plain.ok());
  EXPECT_EQ(plain.status().message(), list.dir / "plain" + ": is not a LevelDB (no CURRENT file)");
  EXPECT_EQ(Names(list.dir / "plain"), std::vector<std::string>{"notes.txt"});  // no LOCK, LOG
  auto file = LevelDbReader::Open(list.dir / "list.txt");
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().message(), list.dir / "list.txt" + ": is not a folder");
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
