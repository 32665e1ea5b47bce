#include "tests/cpp/gpu_test_util.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "common/proto_io.hpp"
#include "tests/cpp/data_test_util.hpp"
#include "tests/cpp/net_test_util.hpp"

namespace pstrain::testing {

std::string WriteLmdbClassifier(const std::string& dir, const std::string& solver_extra) {
  WriteCountingLmdb(dir + "/train_lmdb", 32, 4, 4);
  WriteTextFile(dir + "/net.prototxt", R"(name: "lmdb_classifier"
layer { name: "data" type: "Data" top: "data" top: "label"
        transform_param { scale: 0.00390625 }
        data_param { source: ")" + dir + R"(/train_lmdb" batch_size: 8 backend: LMDB } }
layer { name: "ip1" type: "InnerProduct" bottom: "data" top: "ip1"
        inner_product_param { num_output: 12 weight_filler { type: "gaussian" std: 0.5 }
                              bias_filler { type: "constant" value: 0.1 } } }
layer { name: "relu1" type: "ReLU" bottom: "ip1" top: "ip1" }
layer { name: "ip2" type: "InnerProduct" bottom: "ip1" top: "ip2"
        inner_product_param { num_output: 32 weight_filler { type: "gaussian" std: 0.5 } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip2" bottom: "label" top: "loss" }
layer { name: "accuracy" type: "Accuracy" bottom: "ip2" bottom: "label" top: "accuracy"
        include { phase: TEST } }
)");
  const std::string solver = dir + "/solver.prototxt";
  WriteTextFile(solver, "net: \"" + dir + "/net.prototxt\"\nsnapshot_prefix: \"" + dir +
                            "/snap\"\nrandom_seed: 7\nlr_policy: \"fixed\"\n" + solver_extra +
                            "\n");
  return solver;
}

std::vector<std::vector<float>> CaffemodelBlobs(const std::string& path) {
  caffe::NetParameter model;
  const Status s = ReadBinaryProto(path, &model);
  EXPECT_TRUE(s.ok()) << s.message();
  std::vector<std::vector<float>> blobs;
  for (const auto& layer : model.layer()) {
    for (const auto& blob : layer.blobs())
      blobs.emplace_back(blob.data().begin(), blob.data().end());
  }
  return blobs;
}

void ExpectNear(const std::vector<float>& expected, const std::vector<float>& actual,
                float tolerance, const std::string& what) {
  ASSERT_EQ(expected.size(), actual.size()) << what;
  int misses = 0;
  for (size_t i = 0; i < expected.size() && misses < 5; ++i) {
    const float a = expected[i];
    const float b = actual[i];
    const float bound = tolerance * std::max({1.f, std::fabs(a), std::fabs(b)});
    if (!(std::fabs(a - b) <= bound)) {
      ADD_FAILURE() << what << "[" << i << "]: expected " << a << ", got " << b;
      ++misses;
    }
  }
}

void ExpectAllNear(const std::vector<std::vector<float>>& expected,
                   const std::vector<std::vector<float>>& actual, float tolerance,
                   const std::string& what) {
  ASSERT_EQ(expected.size(), actual.size()) << what;
  for (size_t i = 0; i < expected.size(); ++i) {
    ExpectNear(expected[i], actual[i], tolerance, what + " blob " + std::to_string(i));
  }
}

std::vector<float> DataOf(const Blob& blob) {
  return std::vector<float>(blob.cpu_data(), blob.cpu_data() + blob.count());
}

std::vector<float> DiffOf(const Blob& blob) {
  return std::vector<float>(blob.cpu_diff(), blob.cpu_diff() + blob.count());
}

}  // namespace pstrain::testing
