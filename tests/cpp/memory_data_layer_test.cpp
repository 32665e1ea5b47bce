// MemoryData layer: batches in turn from the caller's arrays, sharding across
// workers as the Data layer shards, the refusal where no caller can give
// arrays (ps-net, ps-worker), and bad sizes. Python layers: the refusal in a
// program that embeds no interpreter.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "tests/cpp/layer_test_util.hpp"
#include "tests/cpp/net_test_util.hpp"
#include "worker/layers/memory_data_layer.hpp"

namespace pstrain {
namespace {

constexpr const char* kMemoryNet = R"(
name: "m"
layer { name: "data" type: "MemoryData" top: "data" top: "label"
        memory_data_param { batch_size: 2 channels: 1 height: 1 width: 3 } }
)";

NetOptions CallerOptions(int rank = 0, int world = 1) {
  NetOptions options;
  options.context.memory_data_from_caller = true;
  options.context.rank = rank;
  options.context.world_size = world;
  return options;
}

MemoryDataLayer* FirstLayer(Net& net) {
  return dynamic_cast<MemoryDataLayer*>(net.layers()[0].get());
}

// Sample i holds 3 values 10*i, 10*i+1, 10*i+2 and the label i.
struct Arrays {
  explicit Arrays(int n) : data(3 * n), labels(n) {
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < 3; ++j) data[3 * i + j] = static_cast<float>(10 * i + j);
      labels[i] = static_cast<float>(i);
    }
  }
  std::vector<float> data, labels;
};

std::vector<float> Labels(const Net& net) {
  const Blob* label = net.blob_by_name("label");
  return std::vector<float>(label->cpu_data(), label->cpu_data() + label->count());
}

TEST(MemoryDataLayerTest, BatchesInTurnAndWrapAround) {
  auto net = testing::BuildNet(kMemoryNet, CallerOptions());
  ASSERT_NE(net, nullptr);
  EXPECT_EQ(net->blob_by_name("data")->shape(), (std::vector<int>{2, 1, 1, 3}));
  EXPECT_EQ(net->blob_by_name("label")->shape(), (std::vector<int>{2}));
  Arrays arrays(6);
  ASSERT_TRUE(FirstLayer(*net)->Reset(arrays.data.data(), arrays.labels.data(), 6).ok());
  const std::vector<std::vector<float>> expected = {{0, 1}, {2, 3}, {4, 5}, {0, 1}};
  for (const auto& labels : expected) {
    net->Forward();
    ASSERT_TRUE(net->RuntimeStatus().ok());
    EXPECT_EQ(Labels(*net), labels);
    const float* data = net->blob_by_name("data")->cpu_data();
    EXPECT_EQ(data[0], 10 * labels[0]);
    EXPECT_EQ(data[5], 10 * labels[1] + 2);
  }
  // The arrays are read at each forward, not copied at Reset.
  arrays.labels[2] = 42.f;
  net->Forward();
  EXPECT_EQ(Labels(*net), (std::vector<float>{42, 3}));
  // Reset starts over.
  ASSERT_TRUE(FirstLayer(*net)->Reset(arrays.data.data(), arrays.labels.data(), 4).ok());
  net->Forward();
  EXPECT_EQ(Labels(*net), (std::vector<float>{0, 1}));
}

TEST(MemoryDataLayerTest, TwoWorkersTogetherSeeWhatOneWorkerWithTwiceTheBatchSees) {
  Arrays arrays(8);
  auto one = testing::BuildNet(
      R"(layer { name: "data" type: "MemoryData" top: "data" top: "label"
         memory_data_param { batch_size: 4 channels: 1 height: 1 width: 3 } })",
      CallerOptions());
  auto w0 = testing::BuildNet(kMemoryNet, CallerOptions(0, 2));
  auto w1 = testing::BuildNet(kMemoryNet, CallerOptions(1, 2));
  for (Net* net : {one.get(), w0.get(), w1.get()}) {
    ASSERT_TRUE(FirstLayer(*net)->Reset(arrays.data.data(), arrays.labels.data(), 8).ok());
  }
  for (int step = 0; step < 3; ++step) {
    one->Forward();
    w0->Forward();
    w1->Forward();
    std::vector<float> together = Labels(*w0);
    const std::vector<float> second = Labels(*w1);
    together.insert(together.end(), second.begin(), second.end());
    EXPECT_EQ(together, Labels(*one)) << "step " << step;
  }
  // A resumed worker continues at its global step.
  w1->SeekData(1);
  w1->Forward();
  EXPECT_EQ(Labels(*w1), (std::vector<float>{6, 7}));
}

TEST(MemoryDataLayerTest, RefusedWhereNoCallerCanGiveArrays) {
  const std::string error = testing::NetError(kMemoryNet);
  EXPECT_NE(error.find("layer 'data' (MemoryData)"), std::string::npos) << error;
  EXPECT_NE(error.find("set_input_arrays"), std::string::npos) << error;
  EXPECT_NE(error.find("ps-net and ps-train jobs have none"), std::string::npos) << error;
}

TEST(MemoryDataLayerTest, BadSizes) {
  const std::string missing = testing::NetError(
      R"(layer { name: "data" type: "MemoryData" top: "data" top: "label"
         memory_data_param { batch_size: 2 channels: 1 height: 1 } })",
      CallerOptions());
  EXPECT_NE(missing.find("memory_data_param.width must be given and positive"), std::string::npos)
      << missing;
  auto net = testing::BuildNet(kMemoryNet, CallerOptions());
  Arrays arrays(3);
  const Status odd = FirstLayer(*net)->Reset(arrays.data.data(), arrays.labels.data(), 3);
  EXPECT_EQ(odd.message(), "MemoryData 'data' takes a multiple of its batch_size 2 samples, got 3");
  net->Forward();  // no arrays yet: a run-time error, no crash
  const Status status = net->RuntimeStatus();
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("call set_input_arrays(data, labels) before forward"),
            std::string::npos)
      << status.message();
}

TEST(PythonLayerTest, RefusedWithoutAnInterpreter) {
  // This test program embeds no Python: the layer says so, naming itself.
  const std::string error = testing::NetError(R"(
    layer { name: "in" type: "Input" top: "x" input_param { shape { dim: 1 } } }
    layer { name: "py" type: "Python" bottom: "x" top: "y"
            python_param { module: "m" layer: "L" } })");
  EXPECT_NE(error.find("layer 'py' (Python)"), std::string::npos) << error;
  EXPECT_NE(error.find("this program cannot run Python layers"), std::string::npos) << error;
  const std::string incomplete = testing::NetError(R"(
    layer { name: "in" type: "Input" top: "x" input_param { shape { dim: 1 } } }
    layer { name: "py" type: "Python" bottom: "x" top: "y" python_param { module: "m" } })");
  EXPECT_NE(incomplete.find("python_param needs both module and layer"), std::string::npos)
      << incomplete;
}

}  // namespace
}  // namespace pstrain
