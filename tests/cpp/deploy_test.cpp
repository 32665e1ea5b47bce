#include "worker/deploy.hpp"

#include <gtest/gtest.h>
#include <google/protobuf/text_format.h>

namespace pstrain {
namespace {

constexpr char kNet[] = R"(
name: "tiny"
layer { name: "data" type: "DummyData" top: "data" top: "label"
  dummy_data_param { shape { dim: 4 dim: 1 dim: 5 dim: 5 } shape { dim: 4 } } }
layer { name: "ip1" type: "InnerProduct" bottom: "data" top: "ip1"
  inner_product_param { num_output: 3 weight_filler { type: "xavier" } } }
layer { name: "relu" type: "ReLU" bottom: "ip1" top: "ip1" }
layer { name: "ip2" type: "InnerProduct" bottom: "ip1" top: "ip2"
  inner_product_param { num_output: 2 } }
layer { name: "acc" type: "Accuracy" bottom: "ip2" bottom: "label" top: "accuracy"
  include { phase: TEST } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip2" bottom: "label" top: "loss" }
)";

TEST(DeployTest, DataBecomesInputAndLossBecomesProb) {
  caffe::NetParameter param;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(kNet, &param));
  NetOptions options;
  options.state.set_phase(caffe::TEST);
  auto net = Net::Create(param, options);
  ASSERT_TRUE(net.ok()) << net.status().message();
  auto deploy = MakeDeployNet(*net.value());
  ASSERT_TRUE(deploy.ok()) << deploy.status().message();
  const auto& d = deploy.value();
  ASSERT_EQ(d.layer_size(), 5);
  EXPECT_EQ(d.layer(0).type(), "Input");
  ASSERT_EQ(d.layer(0).top_size(), 1);  // the label is gone
  EXPECT_EQ(d.layer(0).top(0), "data");
  const auto& shape = d.layer(0).input_param().shape(0);
  ASSERT_EQ(shape.dim_size(), 4);
  EXPECT_EQ(shape.dim(0), 1);
  EXPECT_EQ(shape.dim(2), 5);
  EXPECT_EQ(d.layer(1).name(), "ip1");
  EXPECT_EQ(d.layer(2).name(), "relu");
  EXPECT_EQ(d.layer(3).name(), "ip2");
  EXPECT_EQ(d.layer(4).type(), "Softmax");
  EXPECT_EQ(d.layer(4).bottom(0), "ip2");  // not the split name
  EXPECT_EQ(d.layer(4).top(0), "prob");

  // The deploy net builds, and with the trained weights gives a distribution.
  auto built = Net::Create(d, NetOptions());
  ASSERT_TRUE(built.ok()) << built.status().message();
  caffe::NetParameter weights;
  net.value()->ToProto(&weights);
  ASSERT_TRUE(built.value()->CopyTrainedLayersFrom(weights, "weights").ok());
  built.value()->Forward();
  const Blob* prob = built.value()->blob_by_name("prob");
  ASSERT_NE(prob, nullptr);
  EXPECT_NEAR(prob->cpu_data()[0] + prob->cpu_data()[1], 1.0f, 1e-6);
}

}  // namespace
}  // namespace pstrain
