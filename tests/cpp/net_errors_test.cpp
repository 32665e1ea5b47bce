// Tests of the errors a bad net gives: each is ONE message (one line) naming
// the prototxt file and the line of the offending layer, with our exact text.
// The prototxts are written to a temporary folder.
#include <gtest/gtest.h>

#include <string>

#include "tests/cpp/data_test_util.hpp"
#include "tests/cpp/net_test_util.hpp"
#include "worker/net.hpp"

namespace pstrain {
namespace {

::testing::AssertionResult StartsWith(const std::string& s, const std::string& prefix) {
  if (s.rfind(prefix, 0) == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "\"" << s << "\" does not start with \"" << prefix << "\"";
}

::testing::AssertionResult Contains(const std::string& s, const std::string& part) {
  if (s.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "\"" << s << "\" does not contain \"" << part << "\"";
}

class NetErrorsTest : public ::testing::Test {
 protected:
  // Writes `text` to path_ and builds it; expects failure.
  std::string Error(const std::string& text) {
    testing::WriteTextFile(path_, text);
    auto net = Net::FromFile(path_, NetOptions());
    EXPECT_FALSE(net.ok()) << "the net built";
    if (net.ok()) return "";
    const std::string message = net.status().message();
    EXPECT_EQ(message.find('\n'), std::string::npos) << "more than one line: " << message;
    return message;
  }

  testing::TempDir dir_;
  const std::string path_ = dir_ / "net.prototxt";
};

constexpr const char* kInput =
    "layer { name: \"in\" type: \"Input\" top: \"data\"\n"
    "        input_param { shape { dim: 2 dim: 3 } } }\n";

TEST_F(NetErrorsTest, SyntaxErrorNamesFileLineAndColumn) {
  const std::string message = Error(std::string("name: \"bad\"\n") + kInput +
                                    "layer {\n"
                                    "  name: \"ip\"\n"
                                    "  bottum: \"data\"\n"
                                    "}\n");
  EXPECT_TRUE(StartsWith(message, path_ + ":6:9: "));
  EXPECT_TRUE(Contains(message, "no field named \"bottum\""));
}

TEST_F(NetErrorsTest, UnknownLayerType) {
  const std::string message =
      Error(std::string(kInput) + "\n" + "layer { name: \"x\" type: \"Foo\" bottom: \"data\" }\n");
  EXPECT_TRUE(StartsWith(message, path_ + ":4: layer 'x' (Foo): unknown layer type 'Foo': "
                                          "not a Caffe layer type either"));
  EXPECT_TRUE(Contains(message, " (known types: "));
  EXPECT_TRUE(Contains(message, "InnerProduct, Input"));
  EXPECT_EQ(message.back(), ')');
}

TEST_F(NetErrorsTest, MissingBottom) {
  EXPECT_EQ(Error(std::string(kInput) +
                  "layer { name: \"ip\" type: \"InnerProduct\" bottom: \"dat\" top: \"ip\"\n"
                  "        inner_product_param { num_output: 2 } }\n"),
            path_ +
                ":3: layer 'ip' (InnerProduct): unknown bottom blob 'dat' (no earlier layer "
                "produces it)");
}

TEST_F(NetErrorsTest, DuplicateTop) {
  EXPECT_EQ(Error(std::string(kInput) +
                  "layer { name: \"ip\" type: \"InnerProduct\" bottom: \"data\" top: \"ip\"\n"
                  "        inner_product_param { num_output: 2 } }\n" +
                  "layer { name: \"again\" type: \"InnerProduct\" bottom: \"data\" top: \"ip\"\n"
                  "        inner_product_param { num_output: 2 } }\n"),
            path_ +
                ":5: layer 'again' (InnerProduct): top blob 'ip' is already produced by an "
                "earlier layer (only in-place layers may reuse a name, at the same position "
                "as their bottom)");
}

TEST_F(NetErrorsTest, EltwiseShapeMismatch) {
  EXPECT_EQ(Error(std::string(kInput) +
                  "layer { name: \"ip\" type: \"InnerProduct\" bottom: \"data\" top: \"ip\"\n"
                  "        inner_product_param { num_output: 2 } }\n" +
                  "layer { name: \"sum\" type: \"Eltwise\" bottom: \"data\" bottom: \"ip\"\n"
                  "        top: \"sum\" }\n"),
            path_ +
                ":5: layer 'sum' (Eltwise): bottom 1 has shape 2 2 (4), bottom 0 has 2 3 (6); "
                "Eltwise needs equal shapes");
}

TEST_F(NetErrorsTest, CaffemodelWithOtherInputSize) {
  const std::string ip =
      "layer { name: \"ip\" type: \"InnerProduct\" bottom: \"data\" top: \"ip\"\n"
      "        inner_product_param { num_output: 3 } }\n";
  auto four = testing::BuildNet(
      "layer { name: \"in\" type: \"Input\" top: \"data\" input_param { shape { dim: 2 dim: 4 } } "
      "}\n" +
      ip);
  ASSERT_NE(four, nullptr);
  const std::string model = dir_ / "k4.caffemodel";
  ASSERT_TRUE(four->WriteCaffemodel(model).ok());
  auto three = testing::BuildNet(std::string(kInput) + ip);
  ASSERT_NE(three, nullptr);
  Status s = three->CopyTrainedLayersFromFile(model);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), model +
                             ": layer 'ip' blob 0: shape mismatch: the file has 3 4 (12), the "
                             "net has 3 3 (9)");
}

TEST_F(NetErrorsTest, DataLayerWithMissingLmdb) {
  const std::string source = dir_ / "no_such_lmdb";
  EXPECT_EQ(Error("name: \"d\"\n"
                  "layer { name: \"data\" type: \"Data\" top: \"data\" top: \"label\"\n"
                  "        data_param { source: \"" +
                  source + "\" batch_size: 2 } }\n"),
            path_ + ":2: layer 'data' (Data): " + source +
                ": cannot open LMDB (No such file or directory)");
}

TEST_F(NetErrorsTest, IncludeAndExcludeOnOneLayer) {
  EXPECT_EQ(Error(std::string(kInput) +
                  "layer { name: \"relu\" type: \"ReLU\" bottom: \"data\" top: \"data\"\n"
                  "        include { phase: TRAIN } exclude { stage: \"deploy\" } }\n"),
            path_ +
                ":3: layer 'relu' (ReLU): has both include and exclude rules; give one or "
                "the other");
}

TEST_F(NetErrorsTest, TooManyParamSpecs) {
  EXPECT_EQ(Error(std::string(kInput) +
                  "layer { name: \"ip\" type: \"InnerProduct\" bottom: \"data\" top: \"ip\"\n"
                  "        param { lr_mult: 1 } param { lr_mult: 2 } param { lr_mult: 3 }\n"
                  "        inner_product_param { num_output: 2 } }\n"),
            path_ +
                ":3: layer 'ip' (InnerProduct): 3 param specs given but the layer has 2 "
                "learnable blobs");
}

TEST_F(NetErrorsTest, LinesStayRightAfterAnInputUpgradeAndSplits) {
  // The upgrade puts an Input layer in front and a split follows "data": the
  // line must still be the bad layer's own.
  EXPECT_EQ(Error("input: \"data\"\n"
                  "input_dim: 2 input_dim: 3 input_dim: 1 input_dim: 1\n"
                  "layer { name: \"a\" type: \"ReLU\" bottom: \"data\" top: \"a\" }\n"
                  "layer { name: \"b\" type: \"ReLU\" bottom: \"data\" top: \"b\" }\n"
                  "layer { name: \"c\" type: \"ReLU\" bottom: \"nothing\" top: \"c\" }\n"),
            path_ +
                ":5: layer 'c' (ReLU): unknown bottom blob 'nothing' (no earlier layer "
                "produces it)");
}

TEST_F(NetErrorsTest, V1NetErrorNamesTheLayersLine) {
  EXPECT_EQ(Error("name: \"v1\"\n"
                  "layers { name: \"in\" type: DUMMY_DATA top: \"data\"\n"
                  "         dummy_data_param { shape { dim: 2 dim: 3 } } }\n"
                  "layers { name: \"ip\" type: INNER_PRODUCT bottom: \"data\" top: \"ip\" }\n"),
            path_ + ":4: layer 'ip' (InnerProduct): num_output must be given (and > 0)");
}

TEST_F(NetErrorsTest, MissingFile) {
  auto net = Net::FromFile(dir_ / "absent.prototxt", NetOptions());
  ASSERT_FALSE(net.ok());
  EXPECT_EQ(net.status().message(),
            (dir_ / "absent.prototxt") + ": cannot open (No such file or directory)");
}

}  // namespace
}  // namespace pstrain
