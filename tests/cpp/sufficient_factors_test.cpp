// Sufficient factors (common/ps/sufficient_factors.hpp): the chunk geometry,
// the shard's rebuild against hand-computed products (chunks ending mid-row,
// a shard holding part of the weight), Validate's reasons for a malformed
// factored PUSH, and a worker's capture over iter_size 2 passes of a real
// InnerProduct (plain and transposed) rebuilt equal to the layer's own
// accumulated weight gradient.
#include "common/ps/sufficient_factors.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/ps/factor_rebuild.hpp"
#include "common/transport/validate.hpp"
#include "tests/cpp/net_test_util.hpp"
#include "tests/cpp/transport_test_util.hpp"
#include "worker/ps/sufficient_factors.hpp"

namespace pstrain {
namespace {

using testing::MakeHeader;

// L (2 samples x 2 rows) and R (2 samples x 3 cols); G = L^T R is 2 x 3:
//   G[0] = 1 * [5 6 7] + 3 * [8 9 10] = [29 33 37]
//   G[1] = 2 * [5 6 7] + 4 * [8 9 10] = [42 48 54]
const std::vector<float> kLeft = {1, 2, 3, 4};
const std::vector<float> kRight = {5, 6, 7, 8, 9, 10};

pstrain::Header FactorHeader(const std::vector<std::pair<uint32_t, uint64_t>>& chunks,
                             uint32_t samples, uint32_t row_begin, uint32_t row_end,
                             uint32_t cols) {
  pstrain::Header h = MakeHeader(pstrain::PUSH, 1, 5, chunks);
  h.set_job_key(42);
  pstrain::FactorShape* f = h.mutable_factors();
  f->set_samples(samples);
  f->set_row_begin(row_begin);
  f->set_row_end(row_end);
  f->set_cols(cols);
  return h;
}

std::vector<float> Values(const std::vector<float*>& chunks, const std::vector<int64_t>& lengths) {
  std::vector<float> all;
  for (size_t i = 0; i < chunks.size(); ++i)
    all.insert(all.end(), chunks[i], chunks[i] + lengths[i]);
  return all;
}

TEST(SufficientFactorsTest, ChunkRowsCountPartialRowsAtTheEdges) {
  // 6 values a row; chunks of 4: [0,4) row 0; [4,8) rows 0-1; [8,12) row 1.
  auto placement = KeyPlacement::Create({12}, 2, 16);
  ASSERT_TRUE(placement.ok());
  const KeyPlacement& p = placement.value();
  EXPECT_EQ(ChunkRows(p.chunk(0), 6).begin, 0);
  EXPECT_EQ(ChunkRows(p.chunk(0), 6).end, 1);
  EXPECT_EQ(ChunkRows(p.chunk(1), 6).begin, 0);
  EXPECT_EQ(ChunkRows(p.chunk(1), 6).end, 2);
  EXPECT_EQ(ChunkRows(p.chunk(2), 6).begin, 1);
  EXPECT_EQ(ChunkRows(p.chunk(2), 6).end, 2);
  const WeightRows span = SpanRows(p, {0, 2}, 6);
  EXPECT_EQ(span.begin, 0);
  EXPECT_EQ(span.end, 2);
  EXPECT_EQ(ParamSize(p, 0), 12);
  // 3 samples x (2 rows + 6 cols) x 4 bytes.
  EXPECT_EQ(FactorBytes(3, span, 6, pstrain::FLOAT32), 96);
  // 16 bits: frames of 6 and 18 values, 3 and 9 words.
  EXPECT_EQ(FactorBytes(3, span, 6, pstrain::FLOAT16), 48);
  // An odd count ends in half a word: 1 x 1 and 1 x 3 values, 1 and 2 words.
  EXPECT_EQ(FactorBytes(1, WeightRows{0, 1}, 3, pstrain::BFLOAT16), 12);
  EXPECT_EQ(FactorFrameBytes(pstrain::FLOAT32, 5), 20);
  EXPECT_EQ(FactorFrameBytes(pstrain::FLOAT16, 5), 12);
  EXPECT_EQ(FactorFrameBytes(pstrain::BFLOAT16, 4), 8);
}

TEST(SufficientFactorsTest, FactorsFollowSixteenBitCompressionOnly) {
  EXPECT_EQ(FactorDtype(pstrain::FLOAT32), pstrain::FLOAT32);
  EXPECT_EQ(FactorDtype(pstrain::FLOAT16), pstrain::FLOAT16);
  EXPECT_EQ(FactorDtype(pstrain::BFLOAT16), pstrain::BFLOAT16);
  EXPECT_EQ(FactorDtype(pstrain::TOP_K), pstrain::FLOAT32);
  EXPECT_EQ(FactorDtype(pstrain::SIGN_SCALED), pstrain::FLOAT32);
  EXPECT_TRUE(IsFactorDtype(pstrain::BFLOAT16));
  EXPECT_FALSE(IsFactorDtype(pstrain::SIGN_SCALED));
}

uint32_t WordOf(const std::vector<float>& words, size_t j) {
  uint32_t w;
  std::memcpy(&w, &words[j], 4);
  return w;
}

TEST(SufficientFactorsTest, EncodesAndDecodesFactorsInSixteenBits) {
  // binary16, value 2j in the low half of word j: 1 = 0x3c00, -2.5 = 0xc100,
  // 0.1 rounds to 0x2e66 (0.0999755859375), the odd count's high half is 0.
  const std::vector<float> values = {1.f, -2.5f, 0.1f};
  std::vector<float> words;
  EncodeFactors(pstrain::FLOAT16, values.data(), 3, &words);
  ASSERT_EQ(words.size(), 2u);
  EXPECT_EQ(WordOf(words, 0), 0xc1003c00u);
  EXPECT_EQ(WordOf(words, 1), 0x00002e66u);
  std::vector<float> scratch;
  const float* decoded = DecodeFactors(pstrain::FLOAT16, words.data(), 3, &scratch);
  EXPECT_EQ(std::vector<float>(decoded, decoded + 3),
            (std::vector<float>{1.f, -2.5f, 0.0999755859375f}));
  // bfloat16: float32's top half, rounded: 0.1 = 0x3dcccccd -> 0x3dcd (0.10009765625).
  EncodeFactors(pstrain::BFLOAT16, values.data(), 3, &words);
  EXPECT_EQ(WordOf(words, 0), 0xc0203f80u);
  EXPECT_EQ(WordOf(words, 1), 0x00003dcdu);
  decoded = DecodeFactors(pstrain::BFLOAT16, words.data(), 3, &scratch);
  EXPECT_EQ(decoded[2], 0.10009765625f);
  // float32: a copy out, the frame itself in.
  EncodeFactors(pstrain::FLOAT32, values.data(), 3, &words);
  EXPECT_EQ(words, values);
  EXPECT_EQ(DecodeFactors(pstrain::FLOAT32, values.data(), 3, &scratch), values.data());
}

TEST(SufficientFactorsTest, RebuildFromSixteenBitFactorsIsTheProductOfTheRoundedValues) {
  // kLeft and kRight moved off 16-bit values by less than half a step:
  // 1 + 2^-11 is the midpoint of 1 and 1 + 2^-10 in fp16 (to even: 1), and
  // 10 + 2^-9 is below the midpoint of 10 and 10 + 2^-7. In float32 the
  // product is off the integers ((1 + 2^-11) * 5 + 3 * 8 = 29.00244140625);
  // rebuilt from the decoded 16-bit factors it is kLeft^T kRight exactly, in
  // both encodings (bf16's steps are coarser still).
  const std::vector<float> left = {1.f + 0x1p-11f, 2, 3, 4};
  const std::vector<float> right = {5, 6, 7, 8, 9, 10.f + 0x1p-9f};
  auto placement = KeyPlacement::Create({6}, 1, 16);
  ASSERT_TRUE(placement.ok());
  const pstrain::Header h = FactorHeader({{0, 4}, {1, 2}}, 2, 0, 2, 3);
  FactorRebuild rebuild;
  std::vector<float*> chunks;
  rebuild.Rebuild(h, left.data(), right.data(), placement.value(), &chunks);
  EXPECT_EQ(chunks[0][0], 29.00244140625f);
  for (pstrain::DataType dtype : {pstrain::FLOAT16, pstrain::BFLOAT16}) {
    std::vector<float> left_words, right_words, left_values, right_values;
    EncodeFactors(dtype, left.data(), left.size(), &left_words);
    EncodeFactors(dtype, right.data(), right.size(), &right_words);
    ASSERT_EQ(left_words.size(), 2u);
    ASSERT_EQ(right_words.size(), 3u);
    rebuild.Rebuild(h, DecodeFactors(dtype, left_words.data(), 4, &left_values),
                    DecodeFactors(dtype, right_words.data(), 6, &right_values), placement.value(),
                    &chunks);
    EXPECT_EQ(Values(chunks, {4, 2}), (std::vector<float>{29, 33, 37, 42, 48, 54}))
        << pstrain::DataType_Name(dtype);
  }
}

TEST(SufficientFactorsTest, RebuildEqualsTheHandComputedProduct) {
  // One shard, chunks of 4 values: [0,4) ends mid-row 1, [4,6) is the rest of it.
  auto placement = KeyPlacement::Create({6}, 1, 16);
  ASSERT_TRUE(placement.ok());
  FactorRebuild rebuild;
  std::vector<float*> chunks;
  rebuild.Rebuild(FactorHeader({{0, 4}, {1, 2}}, 2, 0, 2, 3), kLeft.data(), kRight.data(),
                  placement.value(), &chunks);
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_EQ(Values(chunks, {4, 2}), (std::vector<float>{29, 33, 37, 42, 48, 54}));
}

TEST(SufficientFactorsTest, AShardRebuildsOnlyItsChunksFromTheColumnsItGets) {
  // Two shards: chunk 0 (values [0,4), rows 0-1) on shard 0, chunk 1 (values
  // [4,6), row 1) on shard 1, which gets L's column 1 only: [2 4].
  auto placement = KeyPlacement::Create({6}, 2, 16);
  ASSERT_TRUE(placement.ok());
  ASSERT_EQ(placement.value().chunk(1).shard, 1);
  FactorRebuild rebuild;
  std::vector<float*> chunks;
  rebuild.Rebuild(FactorHeader({{0, 4}}, 2, 0, 2, 3), kLeft.data(), kRight.data(),
                  placement.value(), &chunks);
  EXPECT_EQ(Values(chunks, {4}), (std::vector<float>{29, 33, 37, 42}));
  const std::vector<float> column1 = {2, 4};
  rebuild.Rebuild(FactorHeader({{1, 2}}, 2, 1, 2, 3), column1.data(), kRight.data(),
                  placement.value(), &chunks);
  EXPECT_EQ(Values(chunks, {2}), (std::vector<float>{48, 54}));
}

// Parameters of 6 (2 x 3) and 4 values, 4 values a chunk, one shard:
// chunks 0 [0,4) and 1 [4,6) of param 0, chunk 2 of param 1.
class FactorValidateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto placement = KeyPlacement::Create({6, 4}, 1, 16);
    ASSERT_TRUE(placement.ok());
    placement_ = std::move(placement.value());
    rules_.job_key = 42;
    rules_.num_workers = 2;
    rules_.num_servers = 1;
    rules_.placement = &placement_;
    rules_.shard = 0;
  }
  std::string Reason(const pstrain::Header& h, const std::vector<size_t>& frame_bytes) {
    transport::InMessage in;
    in.header = h;
    for (size_t bytes : frame_bytes) in.frames.emplace_back(bytes);
    in.AlignPayloads();
    return transport::Validate(in, rules_).message();
  }
  KeyPlacement placement_;
  transport::ValidationRules rules_;
};

TEST_F(FactorValidateTest, AcceptsAGoodPushAndNamesEachFault) {
  const auto good = FactorHeader({{0, 4}, {1, 2}}, 2, 0, 2, 3);
  EXPECT_EQ(Reason(good, {16, 24}), "");
  EXPECT_EQ(Reason(good, {16, 24, 4}),
            "factors: 3 payload frames follow, a PUSH with factors has 2");
  EXPECT_EQ(Reason(good, {60, 24}), "factors: left frame has 60 bytes, 2 x 2 float32 need 16");
  EXPECT_EQ(Reason(good, {16, 20}), "factors: right frame has 20 bytes, 2 x 3 float32 need 24");
  EXPECT_EQ(Reason(FactorHeader({{0, 4}}, 2, 1, 2, 3), {8, 24}),
            "factors: chunk 0 (values [0, 4)) is outside rows [1, 2) of 3 values");
  EXPECT_EQ(Reason(FactorHeader({{0, 4}, {2, 4}}, 2, 0, 2, 3), {16, 24}),
            "factors: chunk 2 is of parameter 1, chunk 0 of parameter 0");
  EXPECT_EQ(Reason(FactorHeader({{0, 4}}, 2, 0, 2, 4), {16, 32}),
            "factors: parameter 0 has 6 values, not rows of 4 up to row 2");
  EXPECT_EQ(Reason(FactorHeader({{0, 4}}, 0, 0, 2, 3), {0, 0}),
            "factors: samples 0, rows [0, 2), cols 3 (each must be at least 1)");
  // 16 bits: 2 x 2 values in 2 words, 2 x 3 in 3.
  auto half = good;
  half.set_dtype(pstrain::FLOAT16);
  EXPECT_EQ(Reason(half, {8, 12}), "");
  EXPECT_EQ(Reason(half, {16, 24}), "factors: left frame has 16 bytes, 2 x 2 FLOAT16 need 8");
  half.set_dtype(pstrain::BFLOAT16);
  EXPECT_EQ(Reason(half, {8, 8}), "factors: right frame has 8 bytes, 2 x 3 BFLOAT16 need 12");
  // An odd count: 1 x 2 and 1 x 3 values, 1 and 2 words.
  auto odd = FactorHeader({{0, 4}}, 1, 0, 2, 3);
  odd.set_dtype(pstrain::FLOAT16);
  EXPECT_EQ(Reason(odd, {4, 8}), "");
  EXPECT_EQ(Reason(odd, {4, 6}), "factors: right frame has 6 bytes, 1 x 3 FLOAT16 need 8");
  half.set_dtype(pstrain::TOP_K);
  EXPECT_EQ(Reason(half, {8, 12}),
            "factors with dtype TOP_K (they travel as FLOAT32, FLOAT16 or BFLOAT16)");
  auto reply = good;
  reply.set_type(pstrain::PULL_REPLY);
  reply.set_role(pstrain::SERVER);
  reply.set_sender(0);
  rules_.receiver = std::nullopt;
  EXPECT_EQ(Reason(reply, {16, 24}), "factors in a PULL_REPLY (only a PUSH carries them)");
}

// An InnerProduct (3 inputs of 4 values -> 5 outputs) and a Euclidean loss:
// two passes (iter_size 2) with different inputs accumulate the weight's
// gradient; the capture's stacked factors, rebuilt by the shard chunk by
// chunk (chunks of 7 values: mid-row), equal it.
void CheckCaptureOverTwoPasses(bool transpose) {
  const std::string net_text = std::string(R"(
    layer { name: "in" type: "Input" top: "data" top: "target"
      input_param { shape { dim: 3 dim: 4 } shape { dim: 3 dim: 5 } } }
    layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
      inner_product_param { num_output: 5 transpose: )") +
                               (transpose ? "true" : "false") + R"(
        weight_filler { type: "gaussian" std: 0.5 } bias_filler { type: "constant" value: 0.1 } } }
    layer { name: "loss" type: "EuclideanLoss" bottom: "ip" bottom: "target" top: "loss" })";
  auto net = testing::BuildNet(net_text);
  ASSERT_NE(net, nullptr);
  const Blob* weight = net->learnable_params()[0].blob;
  auto placement = KeyPlacement::Create({weight->count(), 5}, 1, 28);
  ASSERT_TRUE(placement.ok());
  auto capture = FactorCapture::Create(*net, {0, 1}, 2, placement.value(), pstrain::FLOAT32);
  // 6 samples x (5 + 4) = 54 values < 20: no; the weight is too small to gain.
  EXPECT_EQ(capture, nullptr);
  // Every InnerProduct weight, the byte test aside.
  capture = FactorCapture::Create(*net, {0, 1}, 2, placement.value(), pstrain::FLOAT32,
                                  /*fewer_bytes=*/false);
  ASSERT_NE(capture, nullptr);
  LayerHooks hooks;
  hooks.after_backward = [&](int layer) { capture->Captured(layer); };
  net->set_layer_hooks(hooks);
  net->ClearParamDiffs();
  capture->StartIteration();
  for (int pass = 0; pass < 2; ++pass) {
    Blob* data = net->blob_by_name("data");
    Blob* target = net->blob_by_name("target");
    for (int i = 0; i < data->count(); ++i)
      data->mutable_cpu_data()[i] = std::sin(1.f + i + 7 * pass);
    for (int i = 0; i < target->count(); ++i)
      target->mutable_cpu_data()[i] = std::cos(2.f * i + pass);
    net->Forward();
    net->Backward();
  }
  const GradientFactors f = capture->factors(0);
  ASSERT_EQ(f.samples, 6);
  EXPECT_EQ(capture->factors(1).samples, 0);  // the bias stays dense
  const int64_t rows = weight->shape(0), cols = weight->shape(1);
  pstrain::Header h =
      FactorHeader({}, 6, 0, static_cast<uint32_t>(rows), static_cast<uint32_t>(cols));
  std::vector<int64_t> lengths;
  for (uint32_t id : placement.value().param_chunks(0)) {
    transport::AddChunk(h, id, static_cast<uint64_t>(placement.value().chunk(id).length));
    lengths.push_back(placement.value().chunk(id).length);
  }
  ASSERT_EQ(lengths.size(), 3u);  // 7, 7, 6 values: chunks end mid-row
  FactorRebuild rebuild;
  std::vector<float*> chunks;
  rebuild.Rebuild(h, f.left, f.right, placement.value(), &chunks);
  const std::vector<float> rebuilt = Values(chunks, lengths);
  const float* diff = weight->cpu_diff();
  float largest = 0;
  for (int i = 0; i < weight->count(); ++i) largest = std::max(largest, std::abs(diff[i]));
  ASSERT_GT(largest, 0.1f);
  for (int i = 0; i < weight->count(); ++i) {
    EXPECT_NEAR(rebuilt[static_cast<size_t>(i)], diff[i], 1e-5f * largest) << "value " << i;
  }
}

TEST(FactorCaptureTest, TwoPassesRebuildTheAccumulatedGradient) {
  CheckCaptureOverTwoPasses(false);
}

TEST(FactorCaptureTest, TransposedWeightTwoPasses) { CheckCaptureOverTwoPasses(true); }

// A weight shared by name between two InnerProduct layers (each layer has its
// own Blob on the owner's memory) sums both layers' products: it does not
// qualify. The unshared one does.
TEST(FactorCaptureTest, AWeightSharedByNameIsNotCaptured) {
  auto net = testing::BuildNet(R"(
    layer { name: "in" type: "Input" top: "a" top: "b" top: "target"
      input_param { shape { dim: 3 dim: 4 } shape { dim: 3 dim: 4 } shape { dim: 3 dim: 5 } } }
    layer { name: "ip_a" type: "InnerProduct" bottom: "a" top: "ya"
      param { name: "w" } inner_product_param { num_output: 5 bias_term: false
        weight_filler { type: "gaussian" std: 0.5 } } }
    layer { name: "ip_b" type: "InnerProduct" bottom: "b" top: "yb"
      param { name: "w" } inner_product_param { num_output: 5 bias_term: false } }
    layer { name: "sum" type: "Eltwise" bottom: "ya" bottom: "yb" top: "y" }
    layer { name: "ip_c" type: "InnerProduct" bottom: "y" top: "z"
      inner_product_param { num_output: 5 bias_term: false
        weight_filler { type: "gaussian" std: 0.5 } } }
    layer { name: "loss" type: "EuclideanLoss" bottom: "z" bottom: "target" top: "loss" })");
  ASSERT_NE(net, nullptr);
  ASSERT_EQ(net->learnable_params().size(), 2u);  // w (owned by ip_a) and ip_c's weight
  auto placement = KeyPlacement::Create({20, 25}, 1, 28);
  ASSERT_TRUE(placement.ok());
  auto capture = FactorCapture::Create(*net, {0, 1}, 1, placement.value(), pstrain::FLOAT32,
                                       /*fewer_bytes=*/false);
  ASSERT_NE(capture, nullptr);
  const std::vector<FactorCapture::WeightShape> shapes = capture->shapes();
  ASSERT_EQ(shapes.size(), 1u);
  EXPECT_EQ(shapes[0].param, 1);
}

// SkipDenseGradients: the layer no longer computes the weight's gradient (its
// diff stays zero) while the factors, the bias gradient and the bottom diff
// are what they were; destroying the capture brings the weight gradient back.
TEST(FactorCaptureTest, SkippingTheDenseGradientKeepsFactorsBiasAndBottomDiff) {
  auto net = testing::BuildNet(R"(
    force_backward: true
    layer { name: "in" type: "Input" top: "data" top: "target"
      input_param { shape { dim: 3 dim: 4 } shape { dim: 3 dim: 5 } } }
    layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
      inner_product_param { num_output: 5
        weight_filler { type: "gaussian" std: 0.5 } bias_filler { type: "constant" value: 0.1 } } }
    layer { name: "loss" type: "EuclideanLoss" bottom: "ip" bottom: "target" top: "loss" })");
  ASSERT_NE(net, nullptr);
  const Blob* weight = net->learnable_params()[0].blob;
  const Blob* bias = net->learnable_params()[1].blob;
  auto placement = KeyPlacement::Create({weight->count(), 5}, 1, 28);
  ASSERT_TRUE(placement.ok());
  Blob* data = net->blob_by_name("data");
  Blob* target = net->blob_by_name("target");
  for (int i = 0; i < data->count(); ++i) data->mutable_cpu_data()[i] = std::sin(1.f + i);
  for (int i = 0; i < target->count(); ++i) target->mutable_cpu_data()[i] = std::cos(2.f * i);
  struct Pass {
    std::vector<float> weight_diff, bias_diff, bottom_diff, left, right;
  };
  auto run = [&](FactorCapture* capture) {
    net->ClearParamDiffs();
    capture->StartIteration();
    net->Forward();
    net->Backward();
    const GradientFactors f = capture->factors(0);
    Pass p;
    p.weight_diff.assign(weight->cpu_diff(), weight->cpu_diff() + weight->count());
    p.bias_diff.assign(bias->cpu_diff(), bias->cpu_diff() + bias->count());
    p.bottom_diff.assign(data->cpu_diff(), data->cpu_diff() + data->count());
    p.left.assign(f.left, f.left + f.samples * weight->shape(0));
    p.right.assign(f.right, f.right + f.samples * weight->shape(1));
    return p;
  };
  auto capture = FactorCapture::Create(*net, {0, 1}, 1, placement.value(), pstrain::FLOAT32,
                                       /*fewer_bytes=*/false);
  ASSERT_NE(capture, nullptr);
  LayerHooks hooks;
  hooks.after_backward = [&](int layer) { capture->Captured(layer); };
  net->set_layer_hooks(hooks);
  const Pass dense = run(capture.get());
  capture->SkipDenseGradients(net.get());
  const Pass skipped = run(capture.get());
  EXPECT_GT(*std::max_element(dense.weight_diff.begin(), dense.weight_diff.end()), 0.01f);
  EXPECT_EQ(skipped.weight_diff, std::vector<float>(dense.weight_diff.size(), 0.f));
  EXPECT_EQ(skipped.bias_diff, dense.bias_diff);
  EXPECT_EQ(skipped.bottom_diff, dense.bottom_diff);
  EXPECT_EQ(skipped.left, dense.left);
  EXPECT_EQ(skipped.right, dense.right);
  net->set_layer_hooks({});
  capture.reset();
  const Layer& ip = *net->layers()[1];
  EXPECT_TRUE(ip.param_propagate_down(0));
  net->ClearParamDiffs();
  net->Forward();
  net->Backward();
  EXPECT_EQ(std::vector<float>(weight->cpu_diff(), weight->cpu_diff() + weight->count()),
            dense.weight_diff);
}

}  // namespace
}  // namespace pstrain
