// CompareModels and `ps-net diff`: differences worked out by hand, and every
// kind of mismatch (NaN on either side, unmatched infinities, a layer or blob
// in one file only, other shapes, a value count that does not fit the shape)
// named and never hidden by the largest difference; the program's exit
// status and output over real .caffemodel files.
#include "worker/model_diff.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "common/proto_io.hpp"
#include "tests/cpp/data_test_util.hpp"
#include "program_path.hpp"

namespace pstrain {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

caffe::BlobProto* AddBlob(caffe::LayerParameter* layer, const std::vector<int64_t>& shape,
                          const std::vector<double>& values) {
  caffe::BlobProto* blob = layer->add_blobs();
  for (int64_t d : shape) blob->mutable_shape()->add_dim(d);
  for (double v : values) blob->add_data(static_cast<float>(v));
  return blob;
}

caffe::LayerParameter* AddLayer(caffe::NetParameter* net, const std::string& name) {
  caffe::LayerParameter* layer = net->add_layer();
  layer->set_name(name);
  layer->set_type("InnerProduct");
  return layer;
}

// ip1: weights {2, 2} and bias {2}; relu1 without blobs; ip2: weights {1, 2}.
caffe::NetParameter Model(const std::vector<double>& ip1_weights = {1, -2, 3, 4}) {
  caffe::NetParameter net;
  caffe::LayerParameter* ip1 = AddLayer(&net, "ip1");
  AddBlob(ip1, {2, 2}, ip1_weights);
  AddBlob(ip1, {2}, {0.5, -0.5});
  AddLayer(&net, "relu1")->set_type("ReLU");
  AddBlob(AddLayer(&net, "ip2"), {1, 2}, {10, 20});
  return net;
}

TEST(ModelDiffTest, IdenticalModelsAreEqual) {
  const ModelDiff d = CompareModels(Model(), Model());
  EXPECT_EQ(d.blobs_compared, 3);
  EXPECT_EQ(d.max_abs, 0);
  EXPECT_EQ(d.max_rel, 0);
  EXPECT_TRUE(d.mismatches.empty());
  EXPECT_TRUE(d.Equal());
}

TEST(ModelDiffTest, LargestAbsoluteAndRelativeDifferences) {
  caffe::NetParameter b = Model({1, -2, 3, 4.5});         // |4 - 4.5| = 0.5 over max |.| = 4.5
  b.mutable_layer(2)->mutable_blobs(0)->set_data(1, 21);  // |20 - 21| = 1 over 21
  const ModelDiff d = CompareModels(Model(), b);
  EXPECT_EQ(d.blobs_compared, 3);
  EXPECT_DOUBLE_EQ(d.max_abs, 1.0);
  EXPECT_DOUBLE_EQ(d.max_rel, 0.5 / 4.5);
  EXPECT_EQ(d.worst, "ip1/0");
  EXPECT_TRUE(d.mismatches.empty());
  EXPECT_FALSE(d.Equal());
  EXPECT_FALSE(d.Equal(0.11));
  EXPECT_TRUE(d.Equal(0.12));
}

TEST(ModelDiffTest, NaNOnEitherSideIsAMismatch) {
  struct Case {
    double a, b;
    std::string a_text, b_text;
  };
  for (const Case& c :
       {Case{kNaN, 4, "nan", "4"}, Case{4, kNaN, "4", "nan"}, Case{kNaN, kNaN, "nan", "nan"},
        Case{kInf, 4, "inf", "4"}, Case{kInf, -kInf, "inf", "-inf"}}) {
    SCOPED_TRACE(c.a_text + " vs " + c.b_text);
    const ModelDiff d = CompareModels(Model({1, -2, 3, c.a}), Model({1, -2, 3, c.b}));
    ASSERT_EQ(d.mismatches.size(), 1u);
    EXPECT_EQ(d.mismatches[0],
              "layer 'ip1' blob 0: 1 value not comparable (NaN, or an infinity "
              "facing another value); the first at index 3: " +
                  c.a_text + " in A, " + c.b_text + " in B");
    EXPECT_EQ(d.max_abs, kInf);
    EXPECT_EQ(d.max_rel, kInf);
    EXPECT_FALSE(d.Equal(1e300));
  }
  // The same infinity on both sides is equal.
  EXPECT_TRUE(CompareModels(Model({1, -2, 3, kInf}), Model({1, -2, 3, kInf})).Equal());
}

TEST(ModelDiffTest, LayerInOneFileOnlyIsNamedWhicheverFileHasIt) {
  caffe::NetParameter extra = Model();
  AddBlob(AddLayer(&extra, "ip3"), {2}, {1, 2});
  const std::string message = "layer 'ip3' has 1 blob in ";
  ModelDiff d = CompareModels(Model(), extra, "a.caffemodel", "b.caffemodel");
  ASSERT_EQ(d.mismatches.size(), 1u);
  EXPECT_EQ(d.mismatches[0], message + "b.caffemodel and none in a.caffemodel");
  EXPECT_EQ(d.blobs_compared, 3);
  EXPECT_FALSE(d.Equal(1e300));
  d = CompareModels(extra, Model(), "a.caffemodel", "b.caffemodel");
  ASSERT_EQ(d.mismatches.size(), 1u);
  EXPECT_EQ(d.mismatches[0], message + "a.caffemodel and none in b.caffemodel");
  // A layer present in both, with blobs in one only.
  caffe::NetParameter empty_ip2 = Model();
  empty_ip2.mutable_layer(2)->clear_blobs();
  d = CompareModels(Model(), empty_ip2);
  ASSERT_EQ(d.mismatches.size(), 1u);
  EXPECT_EQ(d.mismatches[0], "layer 'ip2' has 1 blob in A and none in B");
}

TEST(ModelDiffTest, BlobInOneFileOnly) {
  caffe::NetParameter no_bias = Model();
  no_bias.mutable_layer(0)->mutable_blobs()->RemoveLast();
  const ModelDiff d = CompareModels(Model(), no_bias);
  ASSERT_EQ(d.mismatches.size(), 1u);
  EXPECT_EQ(d.mismatches[0], "layer 'ip1' blob 1 is only in A");
  EXPECT_EQ(d.blobs_compared, 2);
}

TEST(ModelDiffTest, ShapesThatDiffer) {
  caffe::NetParameter b = Model();
  b.mutable_layer(0)->mutable_blobs(0)->mutable_shape()->set_dim(0, 4);
  b.mutable_layer(0)->mutable_blobs(0)->mutable_shape()->set_dim(1, 1);
  ModelDiff d = CompareModels(Model(), b);
  ASSERT_EQ(d.mismatches.size(), 1u);
  EXPECT_EQ(d.mismatches[0], "layer 'ip1' blob 0: shape 2 x 2 in A, 4 x 1 in B");
  EXPECT_EQ(d.blobs_compared, 2);
  // Legacy num/channels/height/width: 1 x 1 x 2 x 2 is the shape 2 x 2.
  caffe::NetParameter legacy = Model();
  caffe::BlobProto* w = legacy.mutable_layer(0)->mutable_blobs(0);
  w->clear_shape();
  w->set_num(1);
  w->set_channels(1);
  w->set_height(2);
  w->set_width(2);
  EXPECT_TRUE(CompareModels(Model(), legacy).Equal());
  w->set_num(2);
  w->set_height(1);
  d = CompareModels(Model(), legacy);
  ASSERT_EQ(d.mismatches.size(), 1u);
  EXPECT_EQ(d.mismatches[0], "layer 'ip1' blob 0: shape 2 x 2 in A, 2 x 1 x 1 x 2 in B");
}

TEST(ModelDiffTest, ValueCountThatDoesNotFitTheShape) {
  caffe::NetParameter b = Model();
  b.mutable_layer(2)->mutable_blobs(0)->add_data(30);
  const ModelDiff d = CompareModels(Model(), b);
  ASSERT_EQ(d.mismatches.size(), 1u);
  EXPECT_EQ(d.mismatches[0], "layer 'ip2' blob 0 holds 3 values for shape 1 x 2 in B");
}

TEST(ModelDiffTest, UnreadableFileIsAnErrorNamingIt) {
  testing::TempDir dir;
  ASSERT_TRUE(WriteBinaryProto(Model(), dir / "a.caffemodel").ok());
  auto d = CompareModelFiles(dir / "a.caffemodel", dir / "missing.caffemodel");
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find(dir / "missing.caffemodel"), std::string::npos)
      << d.status().message();
}

// --- ps-net diff ------------------------------------------------------------------

struct Output {
  int exit_code = -1;
  std::string out;
};

Output PsNetDiff(const std::string& args) {
  const std::string command = ProgramPath("ps-net") + " diff " + args + " 2>&1";
  Output result;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) result.out.append(buffer, n);
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

TEST(ModelDiffTest, PsNetDiffExitStatusAndOutput) {
  testing::TempDir dir;
  const std::string a = dir / "a.caffemodel", same = dir / "same.caffemodel",
                    close = dir / "close.caffemodel", nan = dir / "nan.caffemodel",
                    extra = dir / "extra.caffemodel";
  caffe::NetParameter with_ip3 = Model();
  AddBlob(AddLayer(&with_ip3, "ip3"), {1}, {7});
  ASSERT_TRUE(WriteBinaryProto(Model(), a).ok());
  ASSERT_TRUE(WriteBinaryProto(Model(), same).ok());
  ASSERT_TRUE(WriteBinaryProto(Model({1, -2, 3, 4.5}), close).ok());
  ASSERT_TRUE(WriteBinaryProto(Model({1, -2, kNaN, 4}), nan).ok());
  ASSERT_TRUE(WriteBinaryProto(with_ip3, extra).ok());

  Output o = PsNetDiff(a + " " + same + " --json");
  EXPECT_EQ(o.exit_code, 0) << o.out;
  EXPECT_EQ(o.out,
            "{\"event\":\"diff\",\"blobs\":3,\"max_abs\":0,\"max_rel\":0,\"worst\":\"ip1/0\","
            "\"equal\":true,\"mismatches\":[]}\n");

  o = PsNetDiff(a + " " + close);
  EXPECT_EQ(o.exit_code, 1) << o.out;
  EXPECT_EQ(o.out, "3 blobs compared: max |a-b| = 0.5, max relative = 0.111111111 (ip1/0)\n" + a +
                       " and " + close + " differ\n");
  o = PsNetDiff(a + " " + close + " --max-rel 0.12");
  EXPECT_EQ(o.exit_code, 0) << o.out;

  o = PsNetDiff(a + " " + nan + " --json --max-rel 1e9");
  EXPECT_EQ(o.exit_code, 1) << o.out;
  EXPECT_NE(o.out.find("\"max_abs\":null,\"max_rel\":null"), std::string::npos) << o.out;
  EXPECT_NE(
      o.out.find("\"equal\":false,\"mismatches\":[\"layer 'ip1' blob 0: 1 value not comparable "
                 "(NaN, or an infinity facing another value); the first at index 2: 3 in " +
                 a + ", nan in " + nan + "\"]"),
      std::string::npos)
      << o.out;

  o = PsNetDiff(extra + " " + a);
  EXPECT_EQ(o.exit_code, 1) << o.out;
  EXPECT_NE(o.out.find("mismatch: layer 'ip3' has 1 blob in " + extra + " and none in " + a + "\n"),
            std::string::npos)
      << o.out;

  o = PsNetDiff(a + " " + dir / "missing.caffemodel");
  EXPECT_EQ(o.exit_code, 1) << o.out;
  EXPECT_EQ(o.out.rfind("ps-net: ", 0), 0u) << o.out;
  o = PsNetDiff(a);
  EXPECT_EQ(o.exit_code, 2) << o.out;
}

}  // namespace
}  // namespace pstrain
