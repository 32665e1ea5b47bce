// Tests of worker/upgrade: V1 -> V2 nets, data_param -> transform_param,
// net inputs -> Input layer, BatchNorm param removal, solver_type -> type,
// and the error messages. Expected results are hand-written V2 prototxts.
#include "worker/upgrade.hpp"

#include <google/protobuf/text_format.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <set>
#include <string>

namespace pstrain {
namespace {

template <typename Proto>
Proto Parse(const std::string& text) {
  Proto proto;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &proto)) << text;
  return proto;
}

void ExpectProtoEq(const google::protobuf::Message& expected,
                   const google::protobuf::Message& actual) {
  google::protobuf::util::MessageDifferencer differ;
  std::string diff;
  differ.ReportDifferencesToString(&diff);
  EXPECT_TRUE(differ.Compare(expected, actual)) << diff << "\nactual:\n" << actual.DebugString();
}

// Upgrades `v1_text`, expecting success, and compares with `expected_text`.
void ExpectNetUpgrade(const std::string& v1_text, const std::string& expected_text) {
  auto net = Parse<caffe::NetParameter>(v1_text);
  EXPECT_TRUE(NetNeedsUpgrade(net));
  Status status = UpgradeNet(&net, "old.prototxt");
  ASSERT_TRUE(status.ok()) << status.message();
  ExpectProtoEq(Parse<caffe::NetParameter>(expected_text), net);
  EXPECT_FALSE(NetNeedsUpgrade(net));
}

std::string UpgradeError(const std::string& text) {
  auto net = Parse<caffe::NetParameter>(text);
  Status status = UpgradeNet(&net, "old.prototxt");
  EXPECT_FALSE(status.ok());
  return status.message();
}

TEST(UpgradeNetTest, V1LeNetBecomesV2) {
  ExpectNetUpgrade(R"(
    name: "LeNet"
    layers {
      name: "mnist" type: DATA top: "data" top: "label"
      data_param { source: "train_lmdb" backend: LMDB batch_size: 64
                   scale: 0.00390625 mean_file: "mean.binaryproto" crop_size: 24 mirror: true }
      include { phase: TRAIN }
    }
    layers {
      name: "conv1" type: CONVOLUTION bottom: "data" top: "conv1"
      blobs_lr: 1 blobs_lr: 2 weight_decay: 1 weight_decay: 0
      convolution_param { num_output: 20 kernel_size: 5 stride: 1
                          weight_filler { type: "xavier" } bias_filler { type: "constant" } }
    }
    layers { name: "pool1" type: POOLING bottom: "conv1" top: "pool1"
             pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
    layers { name: "ip1" type: INNER_PRODUCT bottom: "pool1" top: "ip1"
             param: "w_shared" param: "b_shared" blob_share_mode: PERMISSIVE
             inner_product_param { num_output: 500 } }
    layers { name: "relu1" type: RELU bottom: "ip1" top: "ip1" }
    layers { name: "norm1" type: LRN bottom: "ip1" top: "norm1"
             lrn_param { local_size: 3 alpha: 0.0001 beta: 0.75 } }
    layers { name: "drop1" type: DROPOUT bottom: "norm1" top: "norm1"
             dropout_param { dropout_ratio: 0.4 } }
    layers { name: "accuracy" type: ACCURACY bottom: "norm1" bottom: "label" top: "accuracy"
             include { phase: TEST } exclude { stage: "deploy" } }
    layers { name: "loss" type: SOFTMAX_LOSS bottom: "norm1" bottom: "label" top: "loss"
             loss_weight: 2 loss_param { ignore_label: -1 } }
  )",
                   R"(
    name: "LeNet"
    layer {
      name: "mnist" type: "Data" top: "data" top: "label"
      include { phase: TRAIN }
      transform_param { scale: 0.00390625 mean_file: "mean.binaryproto" crop_size: 24
                        mirror: true }
      data_param { source: "train_lmdb" backend: LMDB batch_size: 64 }
    }
    layer {
      name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
      param { lr_mult: 1 decay_mult: 1 } param { lr_mult: 2 decay_mult: 0 }
      convolution_param { num_output: 20 kernel_size: 5 stride: 1
                          weight_filler { type: "xavier" } bias_filler { type: "constant" } }
    }
    layer { name: "pool1" type: "Pooling" bottom: "conv1" top: "pool1"
            pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
    layer { name: "ip1" type: "InnerProduct" bottom: "pool1" top: "ip1"
            param { name: "w_shared" share_mode: PERMISSIVE } param { name: "b_shared" }
            inner_product_param { num_output: 500 } }
    layer { name: "relu1" type: "ReLU" bottom: "ip1" top: "ip1" }
    layer { name: "norm1" type: "LRN" bottom: "ip1" top: "norm1"
            lrn_param { local_size: 3 alpha: 0.0001 beta: 0.75 } }
    layer { name: "drop1" type: "Dropout" bottom: "norm1" top: "norm1"
            dropout_param { dropout_ratio: 0.4 } }
    layer { name: "accuracy" type: "Accuracy" bottom: "norm1" bottom: "label" top: "accuracy"
            include { phase: TEST } exclude { stage: "deploy" } }
    layer { name: "loss" type: "SoftmaxWithLoss" bottom: "norm1" bottom: "label" top: "loss"
            loss_weight: 2 loss_param { ignore_label: -1 } }
  )");
}

TEST(UpgradeNetTest, V1DataLayersOfEveryKindMoveTransformFields) {
  ExpectNetUpgrade(R"(
    layers { name: "img" type: IMAGE_DATA top: "d1" top: "l1"
             image_data_param { source: "list.txt" crop_size: 227 mirror: true } }
    layers { name: "win" type: WINDOW_DATA top: "d2" top: "l2"
             window_data_param { source: "windows.txt" scale: 2 mean_file: "m" }
             transform_param { mean_file: "m" } }
    layers { name: "cat" type: CONCAT bottom: "d1" bottom: "d2" top: "cat"
             concat_param { axis: 1 } }
    layers { name: "elt" type: ELTWISE bottom: "cat" bottom: "cat" top: "elt"
             eltwise_param { operation: MAX } }
  )",
                   R"(
    layer { name: "img" type: "ImageData" top: "d1" top: "l1"
            transform_param { crop_size: 227 mirror: true }
            image_data_param { source: "list.txt" } }
    layer { name: "win" type: "WindowData" top: "d2" top: "l2"
            transform_param { scale: 2 mean_file: "m" }
            window_data_param { source: "windows.txt" } }
    layer { name: "cat" type: "Concat" bottom: "d1" bottom: "d2" top: "cat"
            concat_param { axis: 1 } }
    layer { name: "elt" type: "Eltwise" bottom: "cat" bottom: "cat" top: "elt"
            eltwise_param { operation: MAX } }
  )");
}

TEST(UpgradeNetTest, EveryV1TypeHasAV2Name) {
  const auto* type_enum = caffe::V1LayerParameter::LayerType_descriptor();
  std::set<std::string> names;
  for (int i = 0; i < type_enum->value_count(); ++i) {
    const auto type =
        static_cast<caffe::V1LayerParameter::LayerType>(type_enum->value(i)->number());
    const std::string name = V1LayerTypeName(type);
    if (type == caffe::V1LayerParameter::NONE) {
      EXPECT_EQ(name, "");
    } else {
      EXPECT_NE(name, "") << type_enum->value(i)->name();
      EXPECT_TRUE(names.insert(name).second) << name;
    }
  }
  EXPECT_EQ(names.size(), 39u);
  EXPECT_EQ(V1LayerTypeName(caffe::V1LayerParameter::SIGMOID_CROSS_ENTROPY_LOSS),
            "SigmoidCrossEntropyLoss");
  EXPECT_EQ(V1LayerTypeName(caffe::V1LayerParameter::MULTINOMIAL_LOGISTIC_LOSS),
            "MultinomialLogisticLoss");
  EXPECT_EQ(V1LayerTypeName(caffe::V1LayerParameter::HDF5_DATA), "HDF5Data");
  EXPECT_EQ(V1LayerTypeName(caffe::V1LayerParameter::IM2COL), "Im2col");
  EXPECT_EQ(V1LayerTypeName(caffe::V1LayerParameter::TANH), "TanH");
  EXPECT_EQ(V1LayerTypeName(caffe::V1LayerParameter::ABSVAL), "AbsVal");
  EXPECT_EQ(V1LayerTypeName(caffe::V1LayerParameter::DUMMY_DATA), "DummyData");
  EXPECT_EQ(V1LayerTypeName(static_cast<caffe::V1LayerParameter::LayerType>(99)), "");
}

TEST(UpgradeNetTest, V1CaffemodelKeepsBlobValues) {
  auto v1 = Parse<caffe::NetParameter>(R"(
    name: "tiny"
    layers { name: "ip" type: INNER_PRODUCT bottom: "data" top: "ip"
             blobs { num: 1 channels: 1 height: 2 width: 3 data: 1 data: -2 data: 3.5
                     data: 4 data: 5 data: 6.25 }
             blobs { shape { dim: 2 } data: 0.5 data: -0.5 }
             inner_product_param { num_output: 2 } }
    layers { name: "relu" type: RELU bottom: "ip" top: "ip" }
  )");
  // As read from a binary .caffemodel.
  caffe::NetParameter net;
  ASSERT_TRUE(net.ParseFromString(v1.SerializeAsString()));
  ASSERT_TRUE(UpgradeNet(&net, "old.caffemodel").ok());
  ASSERT_EQ(net.layers_size(), 0);
  ASSERT_EQ(net.layer_size(), 2);
  const caffe::LayerParameter& ip = net.layer(0);
  EXPECT_EQ(ip.type(), "InnerProduct");
  ASSERT_EQ(ip.blobs_size(), 2);
  EXPECT_EQ(ip.blobs(0).height(), 2);
  EXPECT_EQ(ip.blobs(0).width(), 3);
  const float weights[] = {1, -2, 3.5, 4, 5, 6.25};
  ASSERT_EQ(ip.blobs(0).data_size(), 6);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(ip.blobs(0).data(i), weights[i]);
  ASSERT_EQ(ip.blobs(1).shape().dim_size(), 1);
  EXPECT_EQ(ip.blobs(1).shape().dim(0), 2);
  EXPECT_EQ(ip.blobs(1).data(0), 0.5f);
  EXPECT_EQ(ip.blobs(1).data(1), -0.5f);
  EXPECT_EQ(net.layer(1).blobs_size(), 0);
  EXPECT_EQ(net.layer(1).param_size(), 0);
}

TEST(UpgradeNetTest, InputDimBecomesInputLayer) {
  ExpectNetUpgrade(R"(
    name: "AlexNet"
    input: "data" input_dim: 10 input_dim: 3 input_dim: 227 input_dim: 227
    layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
            convolution_param { num_output: 96 kernel_size: 11 stride: 4 } }
    layer { name: "prob" type: "Softmax" bottom: "conv1" top: "prob" }
  )",
                   R"(
    name: "AlexNet"
    layer { name: "input" type: "Input" top: "data"
            input_param { shape { dim: 10 dim: 3 dim: 227 dim: 227 } } }
    layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
            convolution_param { num_output: 96 kernel_size: 11 stride: 4 } }
    layer { name: "prob" type: "Softmax" bottom: "conv1" top: "prob" }
  )");
}

TEST(UpgradeNetTest, InputShapeAndV1LayersTogether) {
  ExpectNetUpgrade(R"(
    input: "data" input: "label"
    input_shape { dim: 4 dim: 1 dim: 28 dim: 28 }
    input_shape { dim: 4 }
    layers { name: "ip" type: INNER_PRODUCT bottom: "data" top: "ip" }
    layers { name: "loss" type: SOFTMAX_LOSS bottom: "ip" bottom: "label" }
  )",
                   R"(
    layer { name: "input" type: "Input" top: "data" top: "label"
            input_param { shape { dim: 4 dim: 1 dim: 28 dim: 28 } shape { dim: 4 } } }
    layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip" }
    layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" }
  )");
}

TEST(UpgradeNetTest, TwoInputDimGroups) {
  auto net = Parse<caffe::NetParameter>(
      "input: 'a' input: 'b' input_dim: 1 input_dim: 2 input_dim: 3 input_dim: 4 "
      "input_dim: 5 input_dim: 6 input_dim: 7 input_dim: 8");
  ASSERT_TRUE(UpgradeNet(&net, "deploy.prototxt").ok());
  ASSERT_EQ(net.layer_size(), 1);
  const caffe::InputParameter& input = net.layer(0).input_param();
  ASSERT_EQ(input.shape_size(), 2);
  EXPECT_EQ(input.shape(1).dim(0), 5);
  EXPECT_EQ(input.shape(1).dim(3), 8);
  EXPECT_EQ(net.input_size() + net.input_dim_size() + net.input_shape_size(), 0);
}

TEST(UpgradeNetTest, FrozenBatchNormParamsAreRemoved) {
  ExpectNetUpgrade(R"(
    layer { name: "bn" type: "BatchNorm" bottom: "x" top: "x"
            param { lr_mult: 0 } param { lr_mult: 0 } param { lr_mult: 0 decay_mult: 0 }
            batch_norm_param { use_global_stats: false } }
    layer { name: "conv" type: "Convolution" bottom: "x" top: "y"
            param { lr_mult: 0 } param { lr_mult: 0 } }
  )",
                   R"(
    layer { name: "bn" type: "BatchNorm" bottom: "x" top: "x"
            batch_norm_param { use_global_stats: false } }
    layer { name: "conv" type: "Convolution" bottom: "x" top: "y"
            param { lr_mult: 0 } param { lr_mult: 0 } }
  )");
  // A BatchNorm with a learnable-looking param is not ours to change (the layer rejects it).
  auto net = Parse<caffe::NetParameter>(
      "layer { name: 'bn' type: 'BatchNorm' param { lr_mult: 0 } param { lr_mult: 1 } }");
  EXPECT_FALSE(NetNeedsUpgrade(net));
  ASSERT_TRUE(UpgradeNet(&net, "n").ok());
  EXPECT_EQ(net.layer(0).param_size(), 2);
}

TEST(UpgradeNetTest, V2DataParamTransformFieldsMove) {
  ExpectNetUpgrade(R"(
    layer { name: "data" type: "Data" top: "data"
            data_param { source: "db" batch_size: 8 scale: 0.5 mirror: false }
            transform_param { scale: 0.5 mean_value: 104 } }
    layer { name: "other" type: "DummyData" top: "z" data_param { scale: 3 } }
  )",
                   R"(
    layer { name: "data" type: "Data" top: "data"
            data_param { source: "db" batch_size: 8 }
            transform_param { scale: 0.5 mean_value: 104 mirror: false } }
    layer { name: "other" type: "DummyData" top: "z" data_param { scale: 3 } }
  )");
}

TEST(UpgradeNetTest, ModernNetIsUnchanged) {
  const std::string text = R"(
    name: "net"
    layer { name: "in" type: "Input" top: "x" input_param { shape { dim: 1 } } }
    layer { name: "data" type: "Data" top: "d" data_param { source: "db" batch_size: 2 }
            transform_param { crop_size: 3 } }
    layer { name: "bn" type: "BatchNorm" bottom: "x" top: "x" }
  )";
  auto net = Parse<caffe::NetParameter>(text);
  EXPECT_FALSE(NetNeedsUpgrade(net));
  ASSERT_TRUE(UpgradeNet(&net, "net.prototxt").ok());
  ExpectProtoEq(Parse<caffe::NetParameter>(text), net);
}

TEST(UpgradeNetTest, Errors) {
  EXPECT_EQ(UpgradeError("layers { layer { name: 'conv1' type: 'conv' num_output: 3 } }"),
            "V0 (pre-2014) nets are not supported: old.prototxt (layers[0] \"conv1\" holds a V0 "
            "layer)");
  EXPECT_EQ(UpgradeError("layers { name: 'a' type: RELU } layer { name: 'b' type: 'ReLU' }"),
            "old.prototxt: the net has both V2 'layer' and V1 'layers' entries; refusing to "
            "upgrade");
  EXPECT_EQ(UpgradeError("layers { name: 'a' type: RELU } layers { name: 'b' type: NONE }"),
            "old.prototxt: V1 layer 1 \"b\": type NONE has no V2 equivalent");
  EXPECT_EQ(UpgradeError("layers { name: 'c' bottom: 'x' }"),
            "old.prototxt: V1 layer 0 \"c\": has no type (or one this reader does not know)");
  EXPECT_EQ(UpgradeError("layer { name: 'd' type: 'Data' data_param { crop_size: 3 } "
                         "transform_param { crop_size: 4 } }"),
            "old.prototxt: layer \"d\": data_param.crop_size 3 disagrees with "
            "transform_param.crop_size 4");
  EXPECT_EQ(UpgradeError("input: 'data' input_dim: 1 input_dim: 3 input_dim: 8"),
            "old.prototxt: 1 input(s) need 4 input_dim values (4 per input), got 3");
  EXPECT_EQ(UpgradeError("input: 'a' input: 'b' input_shape { dim: 1 }"),
            "old.prototxt: 2 input(s) need 2 input_shape entries, got 1");
  EXPECT_EQ(UpgradeError("input: 'a' input_shape { dim: 1 } input_dim: 1"),
            "old.prototxt: input_shape and input_dim cannot both be given");
  EXPECT_EQ(UpgradeError("input: 'data'"),
            "old.prototxt: input \"data\" has no shape: give input_shape or input_dim");
}

TEST(UpgradeSolverTest, SolverTypeBecomesTypeString) {
  const std::pair<const char*, const char*> cases[] = {
      {"SGD", "SGD"},         {"NESTEROV", "Nesterov"}, {"ADAGRAD", "AdaGrad"},
      {"RMSPROP", "RMSProp"}, {"ADADELTA", "AdaDelta"}, {"ADAM", "Adam"}};
  for (const auto& [old_name, type] : cases) {
    auto solver =
        Parse<caffe::SolverParameter>(std::string("base_lr: 0.1 solver_type: ") + old_name);
    EXPECT_TRUE(SolverNeedsUpgrade(solver));
    ASSERT_TRUE(UpgradeSolver(&solver, "solver.prototxt").ok());
    EXPECT_EQ(solver.type(), type);
    EXPECT_FALSE(solver.has_solver_type());
    EXPECT_FALSE(SolverNeedsUpgrade(solver));
  }
}

TEST(UpgradeSolverTest, AgreeingTypesAndEmbeddedNets) {
  auto solver = Parse<caffe::SolverParameter>(R"(
    solver_type: ADAM type: "Adam"
    net_param { layers { name: "r" type: RELU } }
    test_net_param { input: "x" input_dim: 1 input_dim: 1 input_dim: 1 input_dim: 1 }
  )");
  EXPECT_TRUE(SolverNeedsUpgrade(solver));
  ASSERT_TRUE(UpgradeSolver(&solver, "solver.prototxt").ok());
  EXPECT_EQ(solver.type(), "Adam");
  ASSERT_EQ(solver.net_param().layer_size(), 1);
  EXPECT_EQ(solver.net_param().layer(0).type(), "ReLU");
  EXPECT_EQ(solver.test_net_param(0).layer(0).type(), "Input");

  auto modern = Parse<caffe::SolverParameter>("type: 'Nesterov' base_lr: 0.1");
  EXPECT_FALSE(SolverNeedsUpgrade(modern));
}

TEST(UpgradeSolverTest, Errors) {
  auto solver = Parse<caffe::SolverParameter>("solver_type: NESTEROV type: 'Adam'");
  EXPECT_EQ(UpgradeSolver(&solver, "solver.prototxt").message(),
            "solver.prototxt: solver_type NESTEROV (deprecated) means type \"Nesterov\" but type "
            "is \"Adam\"; give only type");
  auto embedded =
      Parse<caffe::SolverParameter>("train_net_param { layers { name: 'x' type: NONE } }");
  EXPECT_EQ(UpgradeSolver(&embedded, "solver.prototxt").message(),
            "solver.prototxt train_net_param: V1 layer 0 \"x\": type NONE has no V2 equivalent");
}

}  // namespace
}  // namespace pstrain
