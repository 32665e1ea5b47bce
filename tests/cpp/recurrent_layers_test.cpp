// Tests of the recurrent layers: LSTMUnit and Embed by hand, LSTM and RNN
// against step-by-step implementations written here from the layers' blobs,
// the state carried between forwards and exposed, parameter order and
// shapes, finite-difference gradients on every engine, and bad parameters.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "tests/cpp/layer_test_util.hpp"

namespace pstrain::testing {
namespace {

using Shape = std::vector<int>;

struct Rig {
  BlobSet bottoms, tops;
  std::unique_ptr<Layer> layer;
  Status SetUp(const std::string& text, const std::vector<Shape>& shapes, Engine engine,
               int num_tops = 1) {
    for (const Shape& s : shapes) BlobSet::FillGaussian(bottoms.Add(s), 3 + bottoms.size());
    for (int t = 0; t < num_tops; ++t) tops.Add({});
    layer = MakeLayer(text, engine);
    // The GPU engine's instances test the layer's GPU path, not its CPU one.
    if (engine == Engine::kGpu) {
      EXPECT_TRUE(layer->HasGpuPath()) << layer->type();
    }
    return layer->SetUp(bottoms.vec(), tops.vec());
  }
  std::vector<float> Top(int i = 0) const {
    return std::vector<float>(tops[i]->cpu_data(), tops[i]->cpu_data() + tops[i]->count());
  }
};

std::string SetUpError(const std::string& text, const std::vector<Shape>& shapes,
                       int num_tops = 1) {
  Rig rig;
  Status s = rig.SetUp(text, shapes, Engine::kReference, num_tops);
  EXPECT_FALSE(s.ok());
  return s.message();
}

double Sigmoid(double x) { return 1 / (1 + std::exp(-x)); }

template <typename EngineTag>
class RecurrentLayersTest : public LayerEngineTest<EngineTag> {};
TYPED_TEST_SUITE(RecurrentLayersTest, LayerEnginesWithGpu, EngineTagName);

// --- LSTMUnit -------------------------------------------------------------------

TYPED_TEST(RecurrentLayersTest, LstmUnitForwardByHand) {
  Rig rig;
  ASSERT_TRUE(
      rig.SetUp("name: 'u' type: 'LSTMUnit'", {{1, 2, 1}, {1, 2, 4}, {1, 2}}, TypeParam::kEngine, 2)
          .ok());
  const float c_prev[] = {0.5f, -1.f};
  const float x[] = {0.1f, 0.2f, 0.3f, 0.4f, -0.5f, 1.f, 2.f, -0.3f};
  const float cont[] = {1.f, 0.f};
  std::copy(c_prev, c_prev + 2, rig.bottoms[0]->mutable_cpu_data());
  std::copy(x, x + 8, rig.bottoms[1]->mutable_cpu_data());
  std::copy(cont, cont + 2, rig.bottoms[2]->mutable_cpu_data());
  rig.layer->Forward(rig.bottoms.vec(), rig.tops.vec());
  for (int n = 0; n < 2; ++n) {
    const float* g = x + 4 * n;
    const double f = cont[n] * Sigmoid(g[1]);
    const double c = f * c_prev[n] + Sigmoid(g[0]) * std::tanh(g[3]);
    EXPECT_NEAR(rig.tops[0]->cpu_data()[n], c, 1e-6) << n;
    EXPECT_NEAR(rig.tops[1]->cpu_data()[n], Sigmoid(g[2]) * std::tanh(c), 1e-6) << n;
  }
  EXPECT_FALSE(rig.layer->AllowForceBackward(2));
}

TYPED_TEST(RecurrentLayersTest, LstmUnitGradients) {
  Rig rig;
  ASSERT_TRUE(
      rig.SetUp("name: 'u' type: 'LSTMUnit'", {{1, 3, 2}, {1, 3, 8}, {1, 3}}, TypeParam::kEngine, 2)
          .ok());
  const float cont[] = {1.f, 0.f, 1.f};
  std::copy(cont, cont + 3, rig.bottoms[2]->mutable_cpu_data());
  CheckGradients(*rig.layer, rig.bottoms.vec(), rig.tops.vec());
}

TEST(RecurrentLayersErrorsTest, LstmUnitShapes) {
  EXPECT_EQ(SetUpError("name: 'u' type: 'LSTMUnit'", {{1, 2, 3}, {1, 2, 8}, {1, 2}}, 2),
            "bottom 1 (x) must hold 4 x 3 gate inputs per stream, got 1 2 8 (16)");
  EXPECT_EQ(SetUpError("name: 'u' type: 'LSTMUnit'", {{1, 2, 3}, {1, 2, 12}, {2, 2}}, 2),
            "bottom 2 (cont) must be 1 x 2 in its first two axes (one timestep of the streams of "
            "bottom 0), got 2 2 (4)");
}

// --- Embed ----------------------------------------------------------------------

std::string EmbedOf(const std::string& extra) {
  return "name: 'e' type: 'Embed' embed_param { num_output: 3 input_dim: 4 "
         "weight_filler { type: 'gaussian' } bias_filler { type: 'gaussian' } " +
         extra + " }";
}

TYPED_TEST(RecurrentLayersTest, EmbedForwardByHandAndBadIndex) {
  Rig rig;
  ASSERT_TRUE(rig.SetUp(EmbedOf(""), {{2, 2}}, TypeParam::kEngine).ok());
  EXPECT_EQ(rig.tops[0]->shape(), Shape({2, 2, 3}));
  ASSERT_EQ(rig.layer->blobs()[0]->shape(), Shape({4, 3}));
  float* w = rig.layer->blobs()[0]->mutable_cpu_data();
  for (int i = 0; i < 12; ++i) w[i] = static_cast<float>(i);
  float* b = rig.layer->blobs()[1]->mutable_cpu_data();
  b[0] = 0.5f, b[1] = 0.f, b[2] = -1.f;
  const float idx[] = {3, 0, 1, 3};
  std::copy(idx, idx + 4, rig.bottoms[0]->mutable_cpu_data());
  rig.layer->Forward(rig.bottoms.vec(), rig.tops.vec());
  EXPECT_TRUE(rig.layer->RuntimeStatus().ok());
  EXPECT_EQ(rig.Top(), std::vector<float>({9.5, 10, 10, 0.5, 1, 1, 3.5, 4, 4, 9.5, 10, 10}));
  rig.bottoms[0]->mutable_cpu_data()[2] = 4.f;
  rig.layer->Forward(rig.bottoms.vec(), rig.tops.vec());
  ASSERT_FALSE(rig.layer->RuntimeStatus().ok());
  EXPECT_EQ(rig.layer->RuntimeStatus().message(),
            "index 4.000000 at position 2 of the bottom is not an integer in [0, input_dim = 4)");
}

TYPED_TEST(RecurrentLayersTest, EmbedGradients) {
  Rig rig;
  ASSERT_TRUE(rig.SetUp(EmbedOf(""), {{5}}, TypeParam::kEngine).ok());
  const float idx[] = {1, 3, 1, 0, 2};  // a repeated index sums its rows' gradients
  std::copy(idx, idx + 5, rig.bottoms[0]->mutable_cpu_data());
  EXPECT_FALSE(rig.layer->AllowForceBackward(0));
  CheckGradients(*rig.layer, rig.bottoms.vec(), rig.tops.vec());
}

TEST(RecurrentLayersErrorsTest, EmbedParams) {
  EXPECT_EQ(SetUpError("name: 'e' type: 'Embed' embed_param { input_dim: 3 }", {{2}}),
            "embed_param.num_output must be given (and > 0)");
  EXPECT_EQ(SetUpError("name: 'e' type: 'Embed' embed_param { num_output: 3 }", {{2}}),
            "embed_param.input_dim must be given (and > 0)");
}

// --- LSTM and RNN -----------------------------------------------------------------

std::string Recurrent(const std::string& type, const std::string& extra = "") {
  return "name: 'r' type: '" + type +
         "' recurrent_param { num_output: 3 weight_filler { type: 'uniform' min: -0.5 max: 0.5 } "
         "bias_filler { type: 'uniform' min: -0.5 max: 0.5 } " +
         extra + " }";
}

// y[r] = sum_k W[r, k] x[k] for a row-major W of `rows` rows.
std::vector<double> MatVec(const Blob& w, const std::vector<double>& x) {
  const int rows = w.shape(0), cols = w.shape(1);
  std::vector<double> y(rows, 0.0);
  for (int r = 0; r < rows; ++r) {
    for (int k = 0; k < cols; ++k) y[r] += w.cpu_data()[r * cols + k] * x[k];
  }
  return y;
}

// An LSTM step by step (Caffe's equations) from the layer's blobs: W_xc, b_c,
// W_hc; h and c start at h0, c0. Returns h_1..h_T, stream-major per step.
std::vector<double> HandLstm(const Layer& layer, const Blob& x, const Blob& cont,
                             std::vector<double> h, std::vector<double> c) {
  const int T = x.shape(0), N = x.shape(1), D = x.shape(2), H = 3;
  const Blob& w_xc = *const_cast<Layer&>(layer).blobs()[0];
  const Blob& b_c = *const_cast<Layer&>(layer).blobs()[1];
  const Blob& w_hc = *const_cast<Layer&>(layer).blobs()[2];
  std::vector<double> out;
  for (int t = 0; t < T; ++t) {
    std::vector<double> h_next(N * H), c_next(N * H);
    for (int n = 0; n < N; ++n) {
      const double k = cont.cpu_data()[t * N + n];
      std::vector<double> xt(x.cpu_data() + (t * N + n) * D, x.cpu_data() + (t * N + n + 1) * D);
      std::vector<double> hp(h.begin() + n * H, h.begin() + (n + 1) * H);
      for (double& v : hp) v *= k;
      const std::vector<double> a = MatVec(w_xc, xt), r = MatVec(w_hc, hp);
      for (int d = 0; d < H; ++d) {
        auto gate = [&](int g) { return a[g * H + d] + b_c.cpu_data()[g * H + d] + r[g * H + d]; };
        const double i = Sigmoid(gate(0)), f = k * Sigmoid(gate(1)), o = Sigmoid(gate(2)),
                     g = std::tanh(gate(3));
        c_next[n * H + d] = f * c[n * H + d] + i * g;
        h_next[n * H + d] = o * std::tanh(c_next[n * H + d]);
      }
    }
    h = h_next;
    c = c_next;
    out.insert(out.end(), h.begin(), h.end());
  }
  return out;
}

void SetCont(Blob* cont, const std::vector<float>& values) {
  std::copy(values.begin(), values.end(), cont->mutable_cpu_data());
}

TYPED_TEST(RecurrentLayersTest, LstmMatchesAStepByStepLstm) {
  Rig rig;
  ASSERT_TRUE(rig.SetUp(Recurrent("LSTM"), {{3, 2, 2}, {3, 2}}, TypeParam::kEngine).ok());
  auto& blobs = rig.layer->blobs();
  ASSERT_EQ(blobs.size(), 3u);  // W_xc, b_c, W_hc: Caffe's order
  EXPECT_EQ(blobs[0]->shape(), Shape({12, 2}));
  EXPECT_EQ(blobs[1]->shape(), Shape({12}));
  EXPECT_EQ(blobs[2]->shape(), Shape({12, 3}));
  // Stream 1 starts a new sequence at t = 2.
  SetCont(rig.bottoms[1], {0, 0, 1, 0, 1, 1});
  rig.layer->Forward(rig.bottoms.vec(), rig.tops.vec());
  ASSERT_EQ(rig.tops[0]->shape(), Shape({3, 2, 3}));
  const std::vector<double> zeros(6, 0.0);
  const std::vector<double> want =
      HandLstm(*rig.layer, *rig.bottoms[0], *rig.bottoms[1], zeros, zeros);
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(rig.Top()[i], want[i], 1e-5) << i;

  // Without cont = 0 the next forward starts from this one's final state.
  const std::vector<float> first = rig.Top();
  std::vector<double> h_T(first.end() - 6, first.end());
  SetCont(rig.bottoms[1], {1, 1, 1, 1, 1, 1});
  rig.layer->Forward(rig.bottoms.vec(), rig.tops.vec());
  // c_T is not a top here: recompute it by running the hand LSTM on both passes.
  SetCont(rig.bottoms[1], {0, 0, 1, 0, 1, 1});
  Blob both({6, 2, 2});
  std::copy(rig.bottoms[0]->cpu_data(), rig.bottoms[0]->cpu_data() + 12, both.mutable_cpu_data());
  std::copy(rig.bottoms[0]->cpu_data(), rig.bottoms[0]->cpu_data() + 12,
            both.mutable_cpu_data() + 12);
  Blob cont_both({6, 2});
  const float cb[] = {0, 0, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1};
  std::copy(cb, cb + 12, cont_both.mutable_cpu_data());
  const std::vector<double> two = HandLstm(*rig.layer, both, cont_both, zeros, zeros);
  for (int i = 0; i < 18; ++i) EXPECT_NEAR(rig.Top()[i], two[18 + i], 1e-5) << i;
}

TYPED_TEST(RecurrentLayersTest, LstmExposedHidden) {
  Rig rig;
  ASSERT_TRUE(rig.SetUp(Recurrent("LSTM", "expose_hidden: true"),
                        {{2, 2, 2}, {2, 2}, {1, 2, 3}, {1, 2, 3}}, TypeParam::kEngine, 3)
                  .ok());
  SetCont(rig.bottoms[1], {1, 1, 1, 1});
  rig.layer->Forward(rig.bottoms.vec(), rig.tops.vec());
  const std::vector<double> h0(rig.bottoms[2]->cpu_data(), rig.bottoms[2]->cpu_data() + 6);
  const std::vector<double> c0(rig.bottoms[3]->cpu_data(), rig.bottoms[3]->cpu_data() + 6);
  const std::vector<double> want = HandLstm(*rig.layer, *rig.bottoms[0], *rig.bottoms[1], h0, c0);
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(rig.Top()[i], want[i], 1e-5) << i;
  ASSERT_EQ(rig.tops[1]->shape(), Shape({1, 2, 3}));  // h_T
  ASSERT_EQ(rig.tops[2]->shape(), Shape({1, 2, 3}));  // c_T
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(rig.Top(1)[i], want[6 + i], 1e-5) << i;
  // The same forward again gives the same result: the state comes from h0, c0.
  const std::vector<float> once = rig.Top();
  rig.layer->Forward(rig.bottoms.vec(), rig.tops.vec());
  EXPECT_EQ(rig.Top(), once);
}

TYPED_TEST(RecurrentLayersTest, LstmGradients) {
  Rig rig;
  ASSERT_TRUE(rig.SetUp(Recurrent("LSTM"), {{3, 2, 2}, {3, 2}}, TypeParam::kEngine).ok());
  if (TypeParam::kEngine == Engine::kGpu) {
    EXPECT_TRUE(rig.layer->HasGpuPath());
  }
  SetCont(rig.bottoms[1], {0, 0, 1, 0, 1, 1});  // t = 1 resets: every forward is the same
  GradientCheckOptions options;
  options.bottoms = {0};
  CheckGradients(*rig.layer, rig.bottoms.vec(), rig.tops.vec(), options);
}

TYPED_TEST(RecurrentLayersTest, LstmStaticInputGradients) {
  Rig rig;
  ASSERT_TRUE(rig.SetUp(Recurrent("LSTM"), {{2, 2, 2}, {2, 2}, {2, 3}}, TypeParam::kEngine).ok());
  ASSERT_EQ(rig.layer->blobs().size(), 4u);  // W_xc, b_c, W_xc_static, W_hc
  EXPECT_EQ(rig.layer->blobs()[2]->shape(), Shape({12, 3}));
  EXPECT_EQ(rig.layer->blobs()[3]->shape(), Shape({12, 3}));
  SetCont(rig.bottoms[1], {0, 0, 1, 1});
  GradientCheckOptions options;
  options.bottoms = {0, 2};
  CheckGradients(*rig.layer, rig.bottoms.vec(), rig.tops.vec(), options);
}

TYPED_TEST(RecurrentLayersTest, RnnMatchesAStepByStepRnn) {
  Rig rig;
  ASSERT_TRUE(rig.SetUp(Recurrent("RNN"), {{3, 2, 2}, {3, 2}}, TypeParam::kEngine).ok());
  auto& b = rig.layer->blobs();
  ASSERT_EQ(b.size(), 5u);  // W_xh, b_h, W_hh, W_ho, b_o
  EXPECT_EQ(b[0]->shape(), Shape({3, 2}));
  EXPECT_EQ(b[2]->shape(), Shape({3, 3}));
  EXPECT_EQ(b[3]->shape(), Shape({3, 3}));
  EXPECT_EQ(b[4]->shape(), Shape({3}));
  SetCont(rig.bottoms[1], {0, 0, 1, 0, 1, 1});
  rig.layer->Forward(rig.bottoms.vec(), rig.tops.vec());
  std::vector<double> h(6, 0.0);
  const Blob& x = *rig.bottoms[0];
  for (int t = 0; t < 3; ++t) {
    for (int n = 0; n < 2; ++n) {
      const double k = rig.bottoms[1]->cpu_data()[t * 2 + n];
      std::vector<double> xt(x.cpu_data() + (t * 2 + n) * 2, x.cpu_data() + (t * 2 + n + 1) * 2);
      std::vector<double> hp(h.begin() + n * 3, h.begin() + n * 3 + 3);
      for (double& v : hp) v *= k;
      const std::vector<double> a = MatVec(*b[0], xt), r = MatVec(*b[2], hp);
      std::vector<double> hn(3);
      for (int d = 0; d < 3; ++d) hn[d] = std::tanh(a[d] + b[1]->cpu_data()[d] + r[d]);
      const std::vector<double> o = MatVec(*b[3], hn);
      for (int d = 0; d < 3; ++d) {
        h[n * 3 + d] = hn[d];
        EXPECT_NEAR(rig.Top()[(t * 2 + n) * 3 + d], std::tanh(o[d] + b[4]->cpu_data()[d]), 1e-5)
            << t << " " << n << " " << d;
      }
    }
  }
}

TYPED_TEST(RecurrentLayersTest, RnnGradients) {
  Rig rig;
  ASSERT_TRUE(rig.SetUp(Recurrent("RNN"), {{3, 2, 2}, {3, 2}}, TypeParam::kEngine).ok());
  SetCont(rig.bottoms[1], {0, 0, 1, 1, 0, 1});
  GradientCheckOptions options;
  options.bottoms = {0};
  CheckGradients(*rig.layer, rig.bottoms.vec(), rig.tops.vec(), options);
}

TEST(RecurrentLayersErrorsTest, RecurrentParams) {
  EXPECT_EQ(SetUpError("name: 'r' type: 'LSTM' recurrent_param { }", {{2, 1, 3}, {2, 1}}),
            "recurrent_param.num_output must be positive");
  EXPECT_EQ(SetUpError(Recurrent("LSTM"), {{2, 1, 3}, {2, 2}}),
            "bottom shapes: bottom 1 (cont) must be 2 x 1 (timesteps x streams of bottom 0), got "
            "2 2 (4)");
  EXPECT_EQ(SetUpError(Recurrent("RNN", "expose_hidden: true"), {{2, 1, 3}, {2, 1}, {1, 1, 2}}, 2),
            "bottom shapes: bottom 2 (initial state h_0) must be 1 1 3 (3), got 1 1 2 (2)");
}

}  // namespace
}  // namespace pstrain::testing
