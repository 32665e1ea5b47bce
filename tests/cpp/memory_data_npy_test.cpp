// MemoryData fed from .npy files (--memory-data): the files written here by
// hand (magic, version, header length, dict, values), the batches read step by
// step against hand-computed rows, the sharding (2 workers of batch 2 read what
// 1 worker of batch 4 reads, wrapping around N), the dtypes converted, and the
// exact error of each bad file.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "tests/cpp/data_test_util.hpp"
#include "tests/cpp/net_test_util.hpp"
#include "worker/data/npy_file.hpp"
#include "worker/layers/memory_data_layer.hpp"

namespace pstrain {
namespace {

// Writes a .npy file: `descr`, `shape` as the header's tuple text ("(5, 1, 1, 3)"),
// the raw values; major version 1 (2-byte header length) or 2/3 (4-byte).
void WriteNpy(const std::string& path, const std::string& descr, const std::string& shape,
              const void* values, size_t bytes, int major = 1, bool fortran = false) {
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") +
                     ", 'shape': " + shape + ", }";
  const size_t prefix = 6 + 2 + (major == 1 ? 2 : 4);
  while ((prefix + dict.size() + 1) % 64 != 0) dict += ' ';
  dict += '\n';
  std::string out = "\x93NUMPY";
  out += static_cast<char>(major);
  out += '\0';
  const uint32_t length = static_cast<uint32_t>(dict.size());
  for (size_t i = 0; i < (major == 1 ? 2u : 4u); ++i) out += static_cast<char>(length >> (8 * i));
  out += dict;
  out.append(static_cast<const char*>(values), bytes);
  std::ofstream file(path, std::ios::binary);
  file << out;
  ASSERT_TRUE(file.good()) << path;
}

template <typename T>
void WriteNpy(const std::string& path, const std::string& descr, const std::string& shape,
              const std::vector<T>& values, int major = 1) {
  WriteNpy(path, descr, shape, values.data(), values.size() * sizeof(T), major);
}

// n samples of 1 x 1 x 3: sample i holds 10*i, 10*i+1, 10*i+2; label i is 100 + i.
struct NpyData {
  NpyData(int n, const testing::TempDir& dir) : data(dir / "x.npy"), labels(dir / "y.npy") {
    std::vector<float> x, y;
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < 3; ++j) x.push_back(static_cast<float>(10 * i + j));
      y.push_back(static_cast<float>(100 + i));
    }
    WriteNpy(data, "<f4", "(" + std::to_string(n) + ", 1, 1, 3)", x);
    WriteNpy(labels, "<f4", "(" + std::to_string(n) + ",)", y);
  }
  std::string data, labels;
};

std::string MemoryNet(int batch) {
  return R"(layer { name: "data" type: "MemoryData" top: "data" top: "label"
            memory_data_param { batch_size: )" +
         std::to_string(batch) + R"( channels: 1 height: 1 width: 3 } })";
}

NetOptions FileOptions(const std::string& data, const std::string& labels, int rank = 0,
                       int world = 1, int64_t start_iter = 0) {
  NetOptions options;
  options.context.memory_data_files.push_back(MemoryDataFiles{"data", data, labels});
  options.context.rank = rank;
  options.context.world_size = world;
  options.context.start_iter = start_iter;
  return options;
}

std::vector<float> Values(const Net& net, const std::string& blob) {
  const Blob* b = net.blob_by_name(blob);
  return std::vector<float>(b->cpu_data(), b->cpu_data() + b->count());
}

// The labels 100 + row and data rows the stream positions [first, first + n) mod N give.
std::vector<float> LabelsAt(int64_t first, int n, int64_t total) {
  std::vector<float> labels;
  for (int i = 0; i < n; ++i) labels.push_back(static_cast<float>(100 + (first + i) % total));
  return labels;
}

TEST(MemoryDataNpyTest, OneWorkerReadsInTurnAndWrapsAroundN) {
  testing::TempDir dir;
  NpyData files(5, dir);  // 5 samples: not a multiple of the batch
  auto net = testing::BuildNet(MemoryNet(2), FileOptions(files.data, files.labels));
  ASSERT_NE(net, nullptr);
  const std::vector<std::vector<float>> labels = {
      {100, 101}, {102, 103}, {104, 100}, {101, 102}, {103, 104}};
  for (size_t step = 0; step < labels.size(); ++step) {
    net->Forward();
    ASSERT_TRUE(net->RuntimeStatus().ok()) << net->RuntimeStatus().message();
    EXPECT_EQ(Values(*net, "label"), labels[step]) << "step " << step;
    EXPECT_EQ(net->layers()[0]->DeliveredFirstSample(), static_cast<int64_t>(2 * step));
  }
  // Step 2 reads row 4, then row 0: 40 41 42 0 1 2.
  net->SeekData(2);
  net->Forward();
  EXPECT_EQ(Values(*net, "data"), (std::vector<float>{40, 41, 42, 0, 1, 2}));
}

TEST(MemoryDataNpyTest, TwoWorkersOfBatchTwoReadWhatOneWorkerOfBatchFourReads) {
  testing::TempDir dir;
  NpyData files(7, dir);
  auto one = testing::BuildNet(MemoryNet(4), FileOptions(files.data, files.labels));
  auto w0 = testing::BuildNet(MemoryNet(2), FileOptions(files.data, files.labels, 0, 2));
  auto w1 = testing::BuildNet(MemoryNet(2), FileOptions(files.data, files.labels, 1, 2));
  ASSERT_TRUE(one && w0 && w1);
  for (int step = 0; step < 6; ++step) {
    for (Net* net : {one.get(), w0.get(), w1.get()}) net->Forward();
    // One worker of batch 4 at step t: positions [4t, 4t + 4) mod 7.
    EXPECT_EQ(Values(*one, "label"), LabelsAt(4 * step, 4, 7)) << "step " << step;
    std::vector<float> labels = Values(*w0, "label"), data = Values(*w0, "data");
    const std::vector<float> labels1 = Values(*w1, "label"), data1 = Values(*w1, "data");
    labels.insert(labels.end(), labels1.begin(), labels1.end());
    data.insert(data.end(), data1.begin(), data1.end());
    EXPECT_EQ(labels, Values(*one, "label")) << "step " << step;
    EXPECT_EQ(data, Values(*one, "data")) << "step " << step;
    EXPECT_EQ(w1->layers()[0]->DeliveredFirstSample(), 4 * step + 2);
  }
  // A worker that starts at iteration 3 (a resumed run) reads step 3 first:
  // worker 1, positions [14, 16) mod 7 = rows 0 and 1.
  auto resumed = testing::BuildNet(MemoryNet(2), FileOptions(files.data, files.labels, 1, 2, 3));
  ASSERT_NE(resumed, nullptr);
  resumed->Forward();
  EXPECT_EQ(Values(*resumed, "label"), (std::vector<float>{100, 101}));
}

TEST(MemoryDataNpyTest, ConvertsDtypesAndReadsEveryVersion) {
  testing::TempDir dir;
  const std::vector<double> x = {0.5, -1.25, 3, 4, 5, 6.75};
  const std::vector<int64_t> y64 = {-3, 9};
  const std::vector<uint8_t> y8 = {7, 255};
  const std::vector<int32_t> y32 = {-2147483647, 12};
  const struct {
    const char* descr;
    const void* values;
    size_t bytes;
    int major;
    std::vector<float> expected;
  } cases[] = {{"<i8", y64.data(), 16, 2, {-3, 9}},
               {"|u1", y8.data(), 2, 3, {7, 255}},
               {"<i4", y32.data(), 8, 1, {-2147483647.f, 12}}};
  WriteNpy(dir / "x.npy", "<f8", "(2, 1, 1, 3)", x);
  for (const auto& c : cases) {
    WriteNpy(dir / "y.npy", c.descr, "(2, 1)", c.values, c.bytes, c.major);
    auto net = testing::BuildNet(MemoryNet(2), FileOptions(dir / "x.npy", dir / "y.npy"));
    ASSERT_NE(net, nullptr) << c.descr;
    net->Forward();
    EXPECT_EQ(Values(*net, "data"), (std::vector<float>{0.5f, -1.25f, 3, 4, 5, 6.75f}));
    EXPECT_EQ(Values(*net, "label"), c.expected) << c.descr;
  }
}

TEST(MemoryDataNpyTest, EachBadFileIsOneErrorNamingIt) {
  testing::TempDir dir;
  NpyData good(3, dir);
  const std::vector<float> four(12, 1.f);
  const std::string bad = dir / "bad.npy";
  const auto error = [&](const std::string& data, const std::string& labels) {
    return testing::NetError(MemoryNet(2), FileOptions(data, labels));
  };
  const std::string prefix = "<net>: layer 'data' (MemoryData): ";
  EXPECT_EQ(error(dir / "none.npy", good.labels), prefix + dir / "none.npy" + ": no such file");
  EXPECT_EQ(error(good.data, dir / "none.npy"), prefix + dir / "none.npy" + ": no such file");

  testing::WriteTextFile(bad, "x,y\n1,2\n");
  EXPECT_EQ(error(bad, good.labels), prefix + bad + ": not a .npy file (no \\x93NUMPY magic)");

  WriteNpy(bad, "<f4", "(4, 1, 1, 3)", four.data(), 48, 1, /*fortran=*/true);
  EXPECT_EQ(error(bad, good.labels), prefix + bad +
                                         ": fortran_order is True; save a C-order array "
                                         "(numpy.ascontiguousarray)");

  WriteNpy(bad, "<f4", "(4, 3)", four);
  EXPECT_EQ(error(bad, good.labels),
            prefix + bad + ": shape (4, 3) does not fit memory_data_param's (N, 1, 1, 3)");
  WriteNpy(bad, "<f4", "(2, 1, 1, 6)", four);
  EXPECT_EQ(error(bad, good.labels),
            prefix + bad + ": shape (2, 1, 1, 6) does not fit memory_data_param's (N, 1, 1, 3)");

  WriteNpy(bad, "<f4", "(1, 1, 1, 3)", four.data(), 12);
  EXPECT_EQ(error(bad, good.labels), prefix + bad + ": 1 sample, fewer than one batch of 2");

  WriteNpy(bad, "<f4", "(4,)", four.data(), 16);
  EXPECT_EQ(error(good.data, bad), prefix + bad + ": shape (4,) is not one label for each of the " +
                                       "3 samples of " + good.data + " (3,)");

  WriteNpy(bad, ">f4", "(4, 1, 1, 3)", four);
  EXPECT_EQ(error(bad, good.labels),
            prefix + bad +
                ": dtype '>f4' is not read (float32/64 or 8- to 64-bit integers, little-endian)");

  WriteNpy(bad, "<f4", "(5, 1, 1, 3)", four);  // 48 bytes of 60
  EXPECT_EQ(error(bad, good.labels),
            prefix + bad +
                ": truncated: shape (5, 1, 1, 3) of '<f4' needs 60 bytes of data, the file has 48");

  std::string broken = "\x93NUMPY";
  broken += {'\x01', '\0', '\x0d', '\0'};
  broken += "{'descr': 1}\n";  // 13 bytes
  testing::WriteTextFile(bad, broken);
  EXPECT_EQ(error(bad, good.labels),
            prefix + bad + ": bad .npy header ('descr' is not a string): {'descr': 1}\n");
}

TEST(MemoryDataNpyTest, WithoutFilesOrCallerTheRefusalNamesTheFlag) {
  EXPECT_EQ(
      testing::NetError(MemoryNet(2)),
      "<net>: layer 'data' (MemoryData): MemoryData takes its samples from arrays handed over in "
      "Python (pstrain.caffe's Net.set_input_arrays) or from .npy files (ps-net's and "
      "ps-worker's --memory-data data=DATA.npy,LABELS.npy); ps-net and ps-train jobs have "
      "none to give it otherwise (use a Data layer over an LMDB, --memory-data, or "
      "pstrain.caffe)");
}

TEST(MemoryDataNpyTest, ParsesTheFlag) {
  auto files = ParseMemoryDataFlags({"data=/a/x.npy,/a/y.npy", "test=x2.npy,y2.npy"});
  ASSERT_TRUE(files.ok()) << files.status().message();
  ASSERT_EQ(files.value().size(), 2u);
  EXPECT_EQ(files.value()[0].layer, "data");
  EXPECT_EQ(files.value()[0].data, "/a/x.npy");
  EXPECT_EQ(files.value()[0].labels, "/a/y.npy");
  EXPECT_EQ(files.value()[1].layer, "test");
  EXPECT_EQ(files.value()[1].data, "x2.npy");
  EXPECT_EQ(files.value()[1].labels, "y2.npy");
  for (const char* bad : {"data", "data=x.npy", "=x.npy,y.npy", "data=,y.npy", "data=x.npy,",
                          "data=x.npy,y.npy,z.npy"}) {
    auto parsed = ParseMemoryDataFlags({bad});
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().message(),
              std::string("--memory-data '") + bad + "': expected LAYER=DATA.npy,LABELS.npy");
  }
  auto twice = ParseMemoryDataFlags({"data=x.npy,y.npy", "data=x.npy,z.npy"});
  ASSERT_FALSE(twice.ok());
  EXPECT_EQ(twice.status().message(), "--memory-data names layer 'data' twice");
}

}  // namespace
}  // namespace pstrain
