// HDF5Data and HDF5Output: rows in Caffe's order across files and wrapping,
// sharding as the Data layer's, seeded shuffles of files and rows, every bad
// list, file and dataset named; HDF5Output appending batch after batch, read
// back. (tests/python/test_hdf5_layers.py holds both against h5py.)
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "tests/cpp/data_test_util.hpp"
#include "tests/cpp/layer_test_util.hpp"
#include "tests/cpp/net_test_util.hpp"
#include "worker/data/hdf5_file.hpp"
#include "worker/layers/hdf5_data_layer.hpp"

namespace pstrain {
namespace {

using testing::BlobSet;
using testing::MakeLayer;
using testing::TempDir;
using testing::WriteTextFile;

// Rows r of file `tag` hold data (10*tag + r, -(10*tag + r)) and label 10*tag + r.
void WriteRows(const std::string& path, int tag, int rows) {
  auto writer = Hdf5AppendWriter::Create(path);
  ASSERT_TRUE(writer.ok()) << writer.status().message();
  std::vector<float> data, label;
  for (int r = 0; r < rows; ++r) {
    data.push_back(10.f * tag + r);
    data.push_back(-(10.f * tag + r));
    label.push_back(10.f * tag + r);
  }
  ASSERT_TRUE(writer.value()->Append("data", {rows, 2}, data.data()).ok());
  ASSERT_TRUE(writer.value()->Append("label", {rows}, label.data()).ok());
}

std::string Hdf5Layer(const std::string& source, int batch, const std::string& extra = "") {
  return "name: 'h5' type: 'HDF5Data' top: 'data' top: 'label' hdf5_data_param { source: '" +
         source + "' batch_size: " + std::to_string(batch) + " " + extra + " }";
}

struct Hdf5Files {
  TempDir dir;
  std::string list = dir / "list.txt";
  Hdf5Files() {
    WriteRows(dir / "a.h5", 1, 3);
    WriteRows(dir / "b.h5", 2, 2);
    WriteTextFile(list, dir / "a.h5\n  " + dir / "b.h5\n");
  }
};

std::vector<float> Labels(Layer& layer, BlobSet& top, int forwards) {
  std::vector<float> labels;
  for (int i = 0; i < forwards; ++i) {
    layer.Forward({}, top.vec());
    EXPECT_TRUE(layer.RuntimeStatus().ok()) << layer.RuntimeStatus().message();
    labels.insert(labels.end(), top[1]->cpu_data(), top[1]->cpu_data() + top[1]->count());
  }
  return labels;
}

TEST(Hdf5DataLayerTest, RowsInCaffesOrderAcrossFilesAndAround) {
  Hdf5Files files;
  BlobSet top;
  top.Add({});
  top.Add({});
  auto layer = MakeLayer(Hdf5Layer(files.list, 2), Engine::kFast);
  ASSERT_TRUE(layer->SetUp({}, top.vec()).ok());
  EXPECT_EQ(top[0]->shape(), (std::vector<int>{2, 2}));
  EXPECT_EQ(top[1]->shape(), (std::vector<int>{2}));
  layer->Forward({}, top.vec());
  EXPECT_EQ(std::vector<float>(top[0]->cpu_data(), top[0]->cpu_data() + 4),
            (std::vector<float>{10, -10, 11, -11}));
  EXPECT_EQ(layer->DeliveredFirstSample(), 0);
  EXPECT_EQ(Labels(*layer, top, 3), (std::vector<float>{12, 20, 21, 10, 11, 12}));
  EXPECT_EQ(layer->DeliveredFirstSample(), 6);
  layer->SeekToBatch(1);
  EXPECT_EQ(Labels(*layer, top, 1), (std::vector<float>{12, 20}));
}

TEST(Hdf5DataLayerTest, WorkersReadTheirShareOfTheStream) {
  Hdf5Files files;
  NetContext context;
  context.rank = 1;
  context.world_size = 2;
  context.start_iter = 1;
  BlobSet top;
  top.Add({});
  top.Add({});
  auto layer = MakeLayer(Hdf5Layer(files.list, 2), Engine::kFast);
  layer->set_context(context);
  ASSERT_TRUE(layer->SetUp({}, top.vec()).ok());
  // Step t of rank 1 of 2: positions (2t + 1) * 2 + {0, 1}: 6, 7 then 10, 11.
  EXPECT_EQ(Labels(*layer, top, 2), (std::vector<float>{11, 12, 10, 11}));
  EXPECT_EQ(layer->DeliveredFirstSample(), 10);
}

TEST(Hdf5DataLayerTest, ShuffleIsSeededAndKeepsEachFileTogether) {
  Hdf5Files files;
  auto pass = [&](uint64_t seed) {
    NetContext context;
    context.seed = seed;
    BlobSet top;
    top.Add({});
    top.Add({});
    auto layer = MakeLayer(Hdf5Layer(files.list, 5, "shuffle: true"), Engine::kFast);
    layer->set_context(context);
    EXPECT_TRUE(layer->SetUp({}, top.vec()).ok());
    return Labels(*layer, top, 8);
  };
  const std::vector<float> a = pass(7);
  EXPECT_EQ(a, pass(7));
  bool differs = false;
  for (uint64_t seed = 1; seed < 6 && !differs; ++seed) differs = pass(seed) != a;
  EXPECT_TRUE(differs);
  const std::vector<float> sorted_pass = {10, 11, 12, 20, 21};
  bool some_pass_reordered = false;
  std::set<bool> a_first_seen;            // the file order is drawn again at every pass
  std::set<std::vector<float>> a_orders;  // and a file's rows each time it is loaded
  for (int p = 0; p < 8; ++p) {
    std::vector<float> rows(a.begin() + 5 * p, a.begin() + 5 * p + 5);
    some_pass_reordered = some_pass_reordered || rows != sorted_pass;
    // A pass is every row once, the rows of a file one after another.
    const bool a_first = rows[0] < 20;
    a_first_seen.insert(a_first);
    a_orders.insert(
        std::vector<float>(rows.begin() + (a_first ? 0 : 2), rows.begin() + (a_first ? 3 : 5)));
    for (int i = 0; i < 5; ++i) EXPECT_EQ(rows[i] < 20, a_first ? i < 3 : i >= 2) << p;
    std::sort(rows.begin(), rows.end());
    EXPECT_EQ(rows, sorted_pass);
  }
  EXPECT_TRUE(some_pass_reordered);
  EXPECT_EQ(a_first_seen.size(), 2u);
  EXPECT_GT(a_orders.size(), 1u);
}

std::string SetUpError(const std::string& layer_text, int tops = 2) {
  BlobSet top;
  for (int t = 0; t < tops; ++t) top.Add({});
  auto layer = MakeLayer(layer_text, Engine::kFast);
  const Status s = layer->SetUp({}, top.vec());
  EXPECT_FALSE(s.ok());
  return s.message();
}

TEST(Hdf5DataLayerTest, BadListsFilesAndDatasetsAreNamed) {
  Hdf5Files files;
  const std::string list = files.list;
  EXPECT_EQ(SetUpError(Hdf5Layer(files.dir / "none.txt", 2)),
            files.dir / "none.txt" + ": cannot open the list of HDF5 files");
  WriteTextFile(files.dir / "empty.txt", " \n");
  EXPECT_EQ(SetUpError(Hdf5Layer(files.dir / "empty.txt", 2)),
            files.dir / "empty.txt" + ": lists no HDF5 file");
  WriteTextFile(files.dir / "missing.txt", files.dir / "a.h5 " + files.dir / "c.h5");
  EXPECT_EQ(SetUpError(Hdf5Layer(files.dir / "missing.txt", 2)),
            files.dir / "missing.txt: " + files.dir / "c.h5: no such file");
  WriteTextFile(files.dir / "text.h5", "not hdf5");
  WriteTextFile(files.dir / "text.txt", files.dir / "text.h5");
  EXPECT_EQ(SetUpError(Hdf5Layer(files.dir / "text.txt", 2)),
            files.dir / "text.txt: " + files.dir / "text.h5: not an HDF5 file");
  EXPECT_EQ(SetUpError("type: 'HDF5Data' top: 'data' top: 'target' hdf5_data_param { source: '" +
                       list + "' batch_size: 2 }"),
            list + ": " + files.dir / "a.h5: dataset 'target' not found");
  {
    auto w = Hdf5AppendWriter::Create(files.dir / "short.h5");
    const std::vector<float> v(8, 1.f);
    ASSERT_TRUE(w.value()->Append("data", {4, 2}, v.data()).ok());
    ASSERT_TRUE(w.value()->Append("label", {3}, v.data()).ok());
  }
  WriteTextFile(files.dir / "short.txt", files.dir / "short.h5");
  EXPECT_EQ(SetUpError(Hdf5Layer(files.dir / "short.txt", 2)),
            files.dir / "short.txt: " +
                files.dir / "short.h5: dataset 'label' has 3 rows but dataset 'data' has 4");
  {
    auto w = Hdf5AppendWriter::Create(files.dir / "wide.h5");
    const std::vector<float> v(9, 1.f);
    ASSERT_TRUE(w.value()->Append("data", {3, 3}, v.data()).ok());
    ASSERT_TRUE(w.value()->Append("label", {3}, v.data()).ok());
  }
  WriteTextFile(files.dir / "wide.txt", files.dir / "a.h5 " + files.dir / "wide.h5");
  EXPECT_EQ(
      SetUpError(Hdf5Layer(files.dir / "wide.txt", 2)),
      files.dir / "wide.txt: " + files.dir / "wide.h5: dataset 'data' has rows of shape 3 (3)" +
          " but the first file's (" + files.dir / "a.h5) are 2 (2)");
  EXPECT_EQ(SetUpError(Hdf5Layer(list, 0)),
            "hdf5_data_param.batch_size must be in [1, 2147483647], got 0");
  EXPECT_EQ(SetUpError("type: 'HDF5Data' top: 'data' hdf5_data_param { batch_size: 2 }", 1),
            "hdf5_data_param.source must be given");
  EXPECT_EQ(SetUpError(Hdf5Layer(list, 2) + " transform_param { scale: 2 }"),
            "HDF5Data does not transform data; remove transform_param");
}

TEST(Hdf5DataLayerTest, TrainsInANet) {
  Hdf5Files files;
  auto net = testing::BuildNet(
      "layer { " + Hdf5Layer(files.list, 4) +
      " }\n"
      "layer { name: 'ip' type: 'InnerProduct' bottom: 'data' top: 'y' inner_product_param {"
      " num_output: 1 weight_filler { type: 'constant' value: 1 } } }\n"
      "layer { name: 'loss' type: 'EuclideanLoss' bottom: 'y' bottom: 'label' top: 'loss' }");
  ASSERT_NE(net, nullptr);
  EXPECT_EQ(net->batch_size(), 4);
  // y = x0 + x1 = 0 for every row: loss = sum(label^2) / (2 * 4).
  EXPECT_FLOAT_EQ(net->Forward(), (100.f + 121 + 144 + 400) / 8);
  EXPECT_FLOAT_EQ(net->Forward(), (441.f + 100 + 121 + 144) / 8);
}

TEST(Hdf5OutputLayerTest, AppendsEveryBatchAsCaffesFourAxes) {
  TempDir dir;
  const std::string file = dir / "out.h5";
  {
    BlobSet bottom;
    Blob* data = bottom.Add({2, 3});
    Blob* label = bottom.Add({2});
    auto layer = MakeLayer("type: 'HDF5Output' hdf5_output_param { file_name: '" + file + "' }",
                           Engine::kFast);
    ASSERT_TRUE(layer->SetUp(bottom.vec(), {}).ok());
    for (int batch = 0; batch < 2; ++batch) {
      for (int i = 0; i < 6; ++i) data->mutable_cpu_data()[i] = 100.f * batch + i;
      label->mutable_cpu_data()[0] = batch;
      label->mutable_cpu_data()[1] = batch + 0.5f;
      layer->Forward(bottom.vec(), {});
      ASSERT_TRUE(layer->RuntimeStatus().ok()) << layer->RuntimeStatus().message();
    }
  }
  auto reader = Hdf5Reader::Open(file);
  ASSERT_TRUE(reader.ok()) << reader.status().message();
  EXPECT_EQ(reader.value()->Shape("data").value(), (std::vector<int>{4, 3, 1, 1}));
  EXPECT_EQ(reader.value()->Shape("label").value(), (std::vector<int>{4, 1, 1, 1}));
  std::vector<float> values;
  ASSERT_TRUE(reader.value()->Read("data", &values).ok());
  EXPECT_EQ(values, (std::vector<float>{0, 1, 2, 3, 4, 5, 100, 101, 102, 103, 104, 105}));
  ASSERT_TRUE(reader.value()->Read("label", &values).ok());
  EXPECT_EQ(values, (std::vector<float>{0, 0.5f, 1, 1.5f}));
}

TEST(Hdf5OutputLayerTest, BadFilesAndShapesAreNamed) {
  TempDir dir;
  BlobSet bottom;
  bottom.Add({2, 3});
  bottom.Add({3});
  auto missing_dir =
      MakeLayer("type: 'HDF5Output' hdf5_output_param { file_name: '" + dir / "no/out.h5" + "' }",
                Engine::kFast);
  EXPECT_EQ(missing_dir->SetUp(bottom.vec(), {}).message(),
            dir / "no/out.h5" + ": cannot create HDF5 file");
  auto layer =
      MakeLayer("type: 'HDF5Output' hdf5_output_param { file_name: '" + dir / "out.h5" + "' }",
                Engine::kFast);
  EXPECT_EQ(layer->SetUp(bottom.vec(), {}).message(),
            "data (bottom 0, 2 3 (6)) and label (bottom 1, 3 (3)) must have the same batch size");
  EXPECT_EQ(MakeLayer("type: 'HDF5Output'", Engine::kFast)->SetUp(bottom.vec(), {}).message(),
            "hdf5_output_param.file_name must be given");
}

}  // namespace
}  // namespace pstrain
