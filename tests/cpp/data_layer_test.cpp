// Data layer: batches, sharding (W workers of B == one worker of W*B), wrap-
// around, start_iter, rewind, deterministic transforms, and errors at setup
// and in the prefetch thread.
#include "worker/layers/data_layer.hpp"

#include <gtest/gtest.h>

#include <cstdio>

#include "tests/cpp/data_test_util.hpp"
#include "tests/cpp/layer_test_util.hpp"
#include "worker/layer_registry.hpp"

namespace pstrain {
namespace {

using testing::TempDir;

std::string DataProto(const std::string& source, int batch, const std::string& extra = "",
                      const std::string& transform = "") {
  return "name: 'data' type: 'Data' top: 'data' top: 'label' data_param { source: '" + source +
         "' batch_size: " + std::to_string(batch) + " backend: LMDB " + extra +
         "} transform_param { " + transform + " }";
}

struct DataRun {
  std::unique_ptr<Layer> layer;
  testing::BlobSet tops;
  Status setup;
  DataLayer* data() { return static_cast<DataLayer*>(layer.get()); }
  // Labels of the next batch.
  std::vector<float> NextLabels() {
    layer->Forward({}, tops.vec());
    return std::vector<float>(tops[1]->cpu_data(), tops[1]->cpu_data() + tops[1]->count());
  }
  std::vector<float> NextData() {
    layer->Forward({}, tops.vec());
    return std::vector<float>(tops[0]->cpu_data(), tops[0]->cpu_data() + tops[0]->count());
  }
};

std::unique_ptr<DataRun> Start(const std::string& proto, NetContext context = {},
                               caffe::Phase phase = caffe::TRAIN, int num_tops = 2) {
  auto run = std::make_unique<DataRun>();
  caffe::LayerParameter param = testing::ParseLayer(proto);
  param.set_phase(phase);
  auto created = LayerRegistry::Global().Create(param);
  EXPECT_TRUE(created.ok());
  run->layer = std::move(created).value();
  run->layer->set_context(context);
  for (int i = 0; i < num_tops; ++i) run->tops.Add({1});
  run->setup = run->layer->SetUp({}, run->tops.vec());
  return run;
}

std::vector<float> Range(std::initializer_list<int> values) {
  return std::vector<float>(values.begin(), values.end());
}

// A ramp LMDB: record i is 1 x 3 x 3 with pixel j = (i * 9 + j) % 256, label i.
void WriteRampLmdb(const std::string& dir, int n) {
  std::vector<std::pair<std::string, std::string>> records;
  char key[16];
  for (int i = 0; i < n; ++i) {
    std::string bytes;
    for (int j = 0; j < 9; ++j) bytes += static_cast<char>((i * 9 + j) % 256);
    std::snprintf(key, sizeof(key), "%08d", i);
    records.emplace_back(key, testing::MakeDatum(1, 3, 3, bytes, i).SerializeAsString());
  }
  testing::WriteLmdb(dir, records);
}

TEST(DataLayerTest, ShapesBatchesAndWrapAround) {
  TempDir dir;
  testing::WriteCountingLmdb(dir / "db", 10, 2, 2);
  auto run = Start(DataProto(dir / "db", 3, "prefetch: 2", "scale: 0.5"));
  ASSERT_TRUE(run->setup.ok()) << run->setup.message();
  EXPECT_EQ(run->tops[0]->shape(), (std::vector<int>{3, 1, 2, 2}));
  EXPECT_EQ(run->tops[1]->shape(), (std::vector<int>{3}));
  EXPECT_EQ(run->data()->record_count(), 10);
  std::vector<float> data = run->NextData();
  const float expected0[] = {0, 0, 0, 0, 0.5, 0.5, 0.5, 0.5, 1, 1, 1, 1};
  ASSERT_EQ(data.size(), 12u);
  for (int i = 0; i < 12; ++i) EXPECT_FLOAT_EQ(data[i], expected0[i]);
  EXPECT_EQ(run->NextLabels(), Range({3, 4, 5}));
  EXPECT_EQ(run->NextLabels(), Range({6, 7, 8}));
  EXPECT_EQ(run->NextLabels(), Range({9, 0, 1}));  // wraps
  EXPECT_EQ(run->NextLabels(), Range({2, 3, 4}));
  EXPECT_EQ(run->data()->next_batch(), 5);
  EXPECT_TRUE(run->data()->status().ok());
}

TEST(DataLayerTest, DataOnlyTop) {
  TempDir dir;
  testing::WriteCountingLmdb(dir / "db", 4, 1, 1);
  auto run = Start(DataProto(dir / "db", 2), {}, caffe::TRAIN, 1);
  ASSERT_TRUE(run->setup.ok()) << run->setup.message();
  EXPECT_EQ(run->NextData(), Range({0, 1}));
  EXPECT_EQ(run->NextData(), Range({2, 3}));
}

TEST(DataLayerTest, TwoWorkersTogetherSeeOneWorkerWithDoubleBatch) {
  TempDir dir;
  WriteRampLmdb(dir / "db", 11);
  // Random crops and mirrors too: the draws follow the sample, not the worker.
  const std::string transform = "crop_size: 2 mirror: true scale: 0.25";
  NetContext one;
  NetContext w0;
  w0.world_size = 2;
  NetContext w1 = w0;
  w1.rank = 1;
  auto single = Start(DataProto(dir / "db", 4, "", transform), one);
  auto rank0 = Start(DataProto(dir / "db", 2, "", transform), w0);
  auto rank1 = Start(DataProto(dir / "db", 2, "", transform), w1);
  ASSERT_TRUE(single->setup.ok() && rank0->setup.ok() && rank1->setup.ok());
  EXPECT_EQ(rank0->tops[0]->shape(), (std::vector<int>{2, 1, 2, 2}));
  bool any_difference_from_plain_crop = false;
  for (int t = 0; t < 7; ++t) {
    std::vector<float> all = single->NextData();
    std::vector<float> labels(single->tops[1]->cpu_data(), single->tops[1]->cpu_data() + 4);
    std::vector<float> joined = rank0->NextData();
    std::vector<float> labels0(rank0->tops[1]->cpu_data(), rank0->tops[1]->cpu_data() + 2);
    std::vector<float> more = rank1->NextData();
    std::vector<float> labels1(rank1->tops[1]->cpu_data(), rank1->tops[1]->cpu_data() + 2);
    joined.insert(joined.end(), more.begin(), more.end());
    labels0.insert(labels0.end(), labels1.begin(), labels1.end());
    EXPECT_EQ(joined, all) << "step " << t;
    EXPECT_EQ(labels0, labels) << "step " << t;
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(labels[i], static_cast<float>((4 * t + i) % 11)) << "step " << t;
      // Top-left pixel of an uncropped, unmirrored window would be label*9.
      const float plain = static_cast<float>((static_cast<int>(labels[i]) * 9) % 256) * 0.25f;
      if (all[i * 4] != plain) any_difference_from_plain_crop = true;
    }
  }
  EXPECT_TRUE(any_difference_from_plain_crop);
}

TEST(DataLayerTest, TransformsAreDeterministic) {
  TempDir dir;
  WriteRampLmdb(dir / "db", 9);
  const std::string proto = DataProto(dir / "db", 3, "prefetch: 1", "crop_size: 2 mirror: true");
  auto a = Start(proto);
  auto b = Start(proto);
  ASSERT_TRUE(a->setup.ok() && b->setup.ok());
  for (int t = 0; t < 5; ++t) EXPECT_EQ(a->NextData(), b->NextData()) << "step " << t;
  NetContext other_seed;
  other_seed.seed = 99;
  auto c = Start(proto, other_seed);
  auto d = Start(proto);
  bool differs = false;
  for (int t = 0; t < 5; ++t) differs |= c->NextData() != d->NextData();
  EXPECT_TRUE(differs);
}

TEST(DataLayerTest, StartIterRewindAndSeek) {
  TempDir dir;
  testing::WriteCountingLmdb(dir / "db", 20, 1, 1);
  NetContext context;
  context.rank = 1;
  context.world_size = 2;
  context.start_iter = 3;
  auto run = Start(DataProto(dir / "db", 2), context);
  ASSERT_TRUE(run->setup.ok());
  EXPECT_EQ(run->data()->next_batch(), 3);
  EXPECT_EQ(run->NextLabels(), Range({14, 15}));  // (3*2 + 1) * 2
  EXPECT_EQ(run->NextLabels(), Range({18, 19}));
  EXPECT_EQ(run->NextLabels(), Range({2, 3}));  // (5*2 + 1) * 2 = 22 mod 20
  run->data()->Rewind();
  EXPECT_EQ(run->data()->next_batch(), 0);
  EXPECT_EQ(run->NextLabels(), Range({2, 3}));
  EXPECT_EQ(run->NextLabels(), Range({6, 7}));
  run->data()->SeekToBatch(4);
  EXPECT_EQ(run->NextLabels(), Range({18, 19}));

  // A test net (rank 0 of 1): every pass starts from the first record.
  auto test = Start(DataProto(dir / "db", 3), {}, caffe::TEST);
  ASSERT_TRUE(test->setup.ok());
  for (int pass = 0; pass < 3; ++pass) {
    EXPECT_EQ(test->NextLabels(), Range({0, 1, 2}));
    EXPECT_EQ(test->NextLabels(), Range({3, 4, 5}));
    test->data()->Rewind();
  }
}

TEST(DataLayerTest, DestroysCleanlyWithAFullQueue) {
  TempDir dir;
  testing::WriteCountingLmdb(dir / "db", 5, 1, 1);
  for (int i = 0; i < 20; ++i) {
    auto run = Start(DataProto(dir / "db", 2, "prefetch: 1"));
    ASSERT_TRUE(run->setup.ok());
    if (i % 2 == 0) run->NextLabels();
  }
}

TEST(DataLayerTest, SetupErrors) {
  TempDir dir;
  auto error = [](const std::string& proto) {
    auto run = Start(proto);
    EXPECT_FALSE(run->setup.ok());
    return run->setup.message();
  };
  EXPECT_EQ(error(DataProto(dir / "none", 2)),
            dir / "none" + ": cannot open LMDB (No such file or directory)");
  testing::WriteLmdb(dir / "empty", {});
  EXPECT_EQ(error(DataProto(dir / "empty", 2)), dir / "empty" + ": LMDB is empty");
  testing::WriteLmdb(dir / "bad", {{"00000000", "\xff\xff"}});
  EXPECT_EQ(error(DataProto(dir / "bad", 2)),
            dir / "bad" + ": record 0 (key '00000000'): not a valid Datum (corrupt protobuf)");
  testing::WriteCountingLmdb(dir / "db", 3, 2, 2);
  EXPECT_EQ(error(DataProto(dir / "db", 0)), "data_param.batch_size must be positive");
  EXPECT_EQ(error("name: 'd' type: 'Data' top: 'data' data_param { batch_size: 2 }"),
            "data_param.source must be given");
  // An LMDB named as a LevelDB source (leveldb_test.cpp has both directions).
  EXPECT_EQ(error("name: 'd' type: 'Data' top: 'data' data_param { source: '" + dir / "db" +
                  "' batch_size: 2 backend: LEVELDB }"),
            dir / "db" +
                ": is an LMDB, not a LevelDB (it holds data.mdb and no CURRENT): set "
                "data_param.backend: LMDB, or leave it unset to detect the format");
  EXPECT_EQ(error(DataProto(dir / "db", 2, "rand_skip: 5")),
            "data_param.rand_skip is not supported (sharding fixes the records each worker "
            "reads)");
  EXPECT_EQ(error(DataProto(dir / "db", 2, "", "crop_size: 3")),
            "transform_param: crop_size 3 is larger than the data (1 x 2 x 2)");
  // An unset backend reads the LMDB it finds.
  auto run = Start("name: 'd' type: 'Data' top: 'data' data_param { source: '" + dir / "db" +
                   "' batch_size: 2 }");
  EXPECT_TRUE(run->setup.ok()) << run->setup.message();
}

TEST(DataLayerTest, DeprecatedDataParamTransformFields) {
  TempDir dir;
  testing::WriteCountingLmdb(dir / "db", 3, 1, 1);
  auto run = Start("name: 'd' type: 'Data' top: 'data' data_param { source: '" + dir / "db" +
                   "' batch_size: 3 scale: 0.5 }");
  ASSERT_TRUE(run->setup.ok());
  EXPECT_EQ(run->NextData(), (std::vector<float>{0.f, 0.5f, 1.f}));
}

TEST(DataLayerTest, BadRecordInThePrefetchThread) {
  TempDir dir;
  std::vector<std::pair<std::string, std::string>> records;
  for (int i = 0; i < 6; ++i) {
    records.emplace_back("0000000" + std::to_string(i),
                         testing::UniformDatum(1, 1, static_cast<uint8_t>(i), i));
  }
  records[4].second = "\x0a\xff\xff";  // corrupt protobuf
  testing::WriteLmdb(dir / "db", records);
  auto run = Start(DataProto(dir / "db", 2));
  ASSERT_TRUE(run->setup.ok()) << run->setup.message();
  EXPECT_EQ(run->NextLabels(), Range({0, 1}));
  EXPECT_EQ(run->NextLabels(), Range({2, 3}));
  EXPECT_TRUE(run->data()->status().ok());
  // Batch 2 holds record 4: the tops keep batch 1 and status() names the record.
  EXPECT_EQ(run->NextLabels(), Range({2, 3}));
  EXPECT_EQ(run->data()->status().message(),
            dir / "db" + ": record 4 (key '00000004'): not a valid Datum (corrupt protobuf)");
  EXPECT_EQ(run->data()->next_batch(), 2);
  EXPECT_EQ(run->NextLabels(), Range({2, 3}));  // no more batches; no hang
  EXPECT_FALSE(run->data()->status().ok());

  // A record whose shape differs from the first record's.
  records[4].second = testing::UniformDatum(2, 1, 4, 4);
  testing::WriteLmdb(dir / "db2", records);
  auto shaped = Start(DataProto(dir / "db2", 5));
  ASSERT_TRUE(shaped->setup.ok());
  shaped->NextLabels();
  EXPECT_EQ(shaped->data()->status().message(),
            dir / "db2" +
                ": record 4 (key '00000004'): shape 1 x 2 x 1 differs from the first "
                "record's 1 x 1 x 1");
}

}  // namespace
}  // namespace pstrain
