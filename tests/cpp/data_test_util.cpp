#include "tests/cpp/data_test_util.hpp"

#include <gtest/gtest.h>
#include <lmdb.h>
#include <stdlib.h>
#include <zlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

namespace pstrain::testing {

TempDir::TempDir() {
  char pattern[] = "/tmp/pstrain_data_test.XXXXXX";
  const char* made = ::mkdtemp(pattern);
  EXPECT_NE(made, nullptr);
  path_ = made != nullptr ? made : "/tmp/pstrain_data_test.failed";
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

void WriteFile(const std::string& path, const std::string& bytes, bool gz) {
  if (gz) {
    gzFile f = gzopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr) << path;
    ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())),
              static_cast<int>(bytes.size()));
    ASSERT_EQ(gzclose(f), Z_OK);
  } else {
    std::ofstream out(path, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    ASSERT_TRUE(out.good()) << path;
  }
}

void WritePng(const std::string& path, const Image& image) {
  auto bytes = EncodeImage(image, ImageFormat::kPng);
  ASSERT_TRUE(bytes.ok()) << path << ": " << bytes.status().message();
  WriteFile(path, bytes.value(), false);
}

static std::string BigEndian(uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
          static_cast<char>(v)};
}

std::string IdxImages(int n, int rows, int cols, const std::string& pixels) {
  return BigEndian(0x803) + BigEndian(n) + BigEndian(rows) + BigEndian(cols) + pixels;
}

std::string IdxLabels(const std::string& labels) {
  return BigEndian(0x801) + BigEndian(static_cast<uint32_t>(labels.size())) + labels;
}

caffe::Datum MakeDatum(int channels, int height, int width, const std::string& bytes, int label) {
  caffe::Datum d;
  d.set_channels(channels);
  d.set_height(height);
  d.set_width(width);
  d.set_data(bytes);
  d.set_label(label);
  return d;
}

std::string UniformDatum(int height, int width, uint8_t value, int label) {
  return MakeDatum(1, height, width,
                   std::string(static_cast<size_t>(height * width), static_cast<char>(value)),
                   label)
      .SerializeAsString();
}

void WriteLmdb(const std::string& dir,
               const std::vector<std::pair<std::string, std::string>>& records) {
  std::filesystem::create_directories(dir);
  MDB_env* env = nullptr;
  ASSERT_EQ(mdb_env_create(&env), 0);
  ASSERT_EQ(mdb_env_set_mapsize(env, size_t{64} << 20), 0);
  ASSERT_EQ(mdb_env_open(env, dir.c_str(), 0, 0664), 0);
  MDB_txn* txn = nullptr;
  ASSERT_EQ(mdb_txn_begin(env, nullptr, 0, &txn), 0);
  MDB_dbi dbi;
  ASSERT_EQ(mdb_dbi_open(txn, nullptr, 0, &dbi), 0);
  for (const auto& [key, value] : records) {
    MDB_val k{key.size(), const_cast<char*>(key.data())};
    MDB_val v{value.size(), const_cast<char*>(value.data())};
    ASSERT_EQ(mdb_put(txn, dbi, &k, &v, 0), 0);
  }
  ASSERT_EQ(mdb_txn_commit(txn), 0);
  mdb_env_close(env);
}

void WriteCountingLmdb(const std::string& dir, int n, int height, int width) {
  std::vector<std::pair<std::string, std::string>> records;
  char key[16];
  for (int i = 0; i < n; ++i) {
    std::snprintf(key, sizeof(key), "%08d", i);
    records.emplace_back(key, UniformDatum(height, width, static_cast<uint8_t>(i % 256), i));
  }
  WriteLmdb(dir, records);
}

void WriteMixedLmdb(const std::string& dir, int n) {
  std::vector<std::pair<std::string, std::string>> records;
  for (int i = 0; i < n; ++i) {
    char key[16];
    std::snprintf(key, sizeof(key), "%08d", i);
    std::string pixels;
    for (int k = 0; k < 4; ++k) pixels += static_cast<char>((i * 37 + k * 61) % 256);
    records.emplace_back(key, MakeDatum(1, 2, 2, pixels, i % 3).SerializeAsString());
  }
  WriteLmdb(dir, records);
}

}  // namespace pstrain::testing
