#include "tests/cpp/layer_test_util.hpp"

#include <google/protobuf/text_format.h>

#include <algorithm>
#include <cmath>

#include "common/device.hpp"
#include "worker/layer_registry.hpp"

namespace pstrain::testing {

bool SkipWithoutGpu() {
  if (CudaDeviceCount() > 0) return false;
  [] { GTEST_SKIP() << DeviceSummary(); }();
  return true;
}

Blob* BlobSet::Add(const std::vector<int>& shape) {
  blobs_.push_back(std::make_unique<Blob>(shape));
  return blobs_.back().get();
}

void BlobSet::FillGaussian(Blob* blob, uint64_t seed, float stddev) {
  Rng rng(seed);
  float* d = blob->mutable_cpu_data();
  for (int64_t i = 0; i < blob->count(); ++i) d[i] = rng.Gaussian(0.f, stddev);
}

void BlobSet::FillUniform(Blob* blob, uint64_t seed, float lo, float hi) {
  Rng rng(seed);
  float* d = blob->mutable_cpu_data();
  for (int64_t i = 0; i < blob->count(); ++i) d[i] = rng.Uniform(lo, hi);
}

BlobVec BlobSet::vec() const {
  BlobVec v;
  for (const auto& b : blobs_) v.push_back(b.get());
  return v;
}

caffe::LayerParameter ParseLayer(const std::string& text) {
  caffe::LayerParameter param;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &param)) << text;
  return param;
}

std::unique_ptr<Layer> MakeLayer(const std::string& prototxt_layer, Engine engine) {
  auto created = LayerRegistry::Global().Create(ParseLayer(prototxt_layer));
  EXPECT_TRUE(created.ok()) << created.status().message();
  if (!created.ok()) return nullptr;
  std::unique_ptr<Layer> layer = std::move(created).value();
  layer->set_engine(engine);
  return layer;
}

void ExpectBlobsNear(const float* a, const float* b, int64_t n, float tol,
                     const std::string& what) {
  for (int64_t i = 0; i < n; ++i) {
    const float scale = std::max({1.f, std::fabs(a[i]), std::fabs(b[i])});
    ASSERT_LE(std::fabs(a[i] - b[i]), tol * scale)
        << what << " differs at " << i << ": " << a[i] << " vs " << b[i];
  }
}

namespace {

// Objective sum_t sum_i w[t][i] * top[t][i] with fixed weights.
double Objective(const BlobVec& top, const std::vector<std::vector<float>>& weights) {
  double sum = 0;
  for (size_t t = 0; t < top.size(); ++t) {
    const float* d = top[t]->cpu_data();
    for (int64_t i = 0; i < top[t]->count(); ++i) sum += static_cast<double>(weights[t][i]) * d[i];
  }
  return sum;
}

}  // namespace

void CheckGradients(Layer& layer, const BlobVec& bottom, const BlobVec& top,
                    const GradientCheckOptions& options) {
  std::vector<int> bottoms = options.bottoms;
  if (bottoms.empty()) {
    for (size_t i = 0; i < bottom.size(); ++i) {
      if (layer.AllowForceBackward(static_cast<int>(i))) bottoms.push_back(static_cast<int>(i));
    }
  }
  // Blobs to check: chosen bottoms, then params.
  std::vector<Blob*> checked;
  std::vector<std::string> names;
  for (int b : bottoms) {
    checked.push_back(bottom[b]);
    names.push_back("bottom " + std::to_string(b));
  }
  if (options.check_params) {
    for (size_t p = 0; p < layer.blobs().size(); ++p) {
      checked.push_back(layer.blobs()[p].get());
      names.push_back("param " + std::to_string(p));
    }
  }

  // Analytic gradients.
  Rng rng(options.seed);
  layer.Forward(bottom, top);
  std::vector<std::vector<float>> weights(top.size());
  for (size_t t = 0; t < top.size(); ++t) {
    weights[t].resize(top[t]->count());
    for (auto& w : weights[t]) w = rng.Uniform(-1.f, 1.f);
  }
  for (auto& p : layer.blobs()) p->SetDiffZero();
  for (Blob* b : bottom) b->SetDiffZero();
  for (size_t t = 0; t < top.size(); ++t) {
    std::copy(weights[t].begin(), weights[t].end(), top[t]->mutable_cpu_diff());
  }
  std::vector<bool> propagate(bottom.size(), false);
  for (int b : bottoms) propagate[b] = true;
  layer.Backward(top, propagate, bottom);
  std::vector<std::vector<float>> analytic;
  for (Blob* blob : checked) analytic.emplace_back(blob->cpu_diff(), blob->cpu_diff() + blob->count());

  // Numeric gradients, element by element.
  for (size_t c = 0; c < checked.size(); ++c) {
    Blob* blob = checked[c];
    for (int64_t i = 0; i < blob->count(); ++i) {
      float* data = blob->mutable_cpu_data();
      const float original = data[i];
      if (options.kink_range > 0 && std::fabs(original - options.kink) < options.kink_range) {
        continue;
      }
      data[i] = original + options.step;
      layer.Forward(bottom, top);
      const double plus = Objective(top, weights);
      blob->mutable_cpu_data()[i] = original - options.step;
      layer.Forward(bottom, top);
      const double minus = Objective(top, weights);
      blob->mutable_cpu_data()[i] = original;
      const double numeric = (plus - minus) / (2.0 * options.step);
      const double a = analytic[c][i];
      const double scale = std::max({std::fabs(a), std::fabs(numeric), 1.0});
      ASSERT_LE(std::fabs(a - numeric), options.threshold * scale)
          << layer.type() << " " << names[c] << " element " << i << ": analytic " << a
          << " numeric " << numeric;
    }
  }
}

void ExpectEnginesAgree(const std::string& prototxt_layer,
                        const std::vector<std::vector<int>>& bottom_shapes,
                        const std::function<void(const BlobVec&)>& fill, float tolerance,
                        int num_tops, Engine engine) {
  if (engine == Engine::kGpu) PSTRAIN_SKIP_WITHOUT_GPU();
  BlobSet bottoms[2];
  BlobSet tops[2];
  std::unique_ptr<Layer> layers[2];
  const Engine engines[2] = {Engine::kReference, engine};
  for (int e = 0; e < 2; ++e) {
    for (const auto& shape : bottom_shapes) bottoms[e].Add(shape);
    for (int t = 0; t < num_tops; ++t) tops[e].Add({});
    fill(bottoms[e].vec());
    layers[e] = MakeLayer(prototxt_layer, engines[e]);
    ASSERT_NE(layers[e], nullptr);
    Status s = layers[e]->SetUp(bottoms[e].vec(), tops[e].vec());
    ASSERT_TRUE(s.ok()) << s.message();
  }
  ASSERT_EQ(layers[0]->blobs().size(), layers[1]->blobs().size());
  for (size_t p = 0; p < layers[0]->blobs().size(); ++p) {
    layers[1]->blobs()[p]->CopyFrom(*layers[0]->blobs()[p]);
  }
  for (int e = 0; e < 2; ++e) layers[e]->Forward(bottoms[e].vec(), tops[e].vec());
  for (int t = 0; t < num_tops; ++t) {
    ASSERT_EQ(tops[0][t]->shape(), tops[1][t]->shape());
    ExpectBlobsNear(tops[0][t]->cpu_data(), tops[1][t]->cpu_data(), tops[0][t]->count(),
                    tolerance, "top " + std::to_string(t));
  }
  std::vector<bool> propagate;
  for (size_t b = 0; b < bottom_shapes.size(); ++b) {
    propagate.push_back(layers[0]->AllowForceBackward(static_cast<int>(b)));
  }
  for (int e = 0; e < 2; ++e) {
    for (int t = 0; t < num_tops; ++t) {
      Rng rng(99 + t);
      float* diff = tops[e][t]->mutable_cpu_diff();
      for (int64_t i = 0; i < tops[e][t]->count(); ++i) diff[i] = rng.Uniform(-1.f, 1.f);
    }
    for (auto& p : layers[e]->blobs()) p->SetDiffZero();
    layers[e]->Backward(tops[e].vec(), propagate, bottoms[e].vec());
  }
  for (size_t b = 0; b < bottom_shapes.size(); ++b) {
    if (!propagate[b]) continue;
    ExpectBlobsNear(bottoms[0][b]->cpu_diff(), bottoms[1][b]->cpu_diff(), bottoms[0][b]->count(),
                    tolerance, "bottom diff " + std::to_string(b));
  }
  for (size_t p = 0; p < layers[0]->blobs().size(); ++p) {
    ExpectBlobsNear(layers[0]->blobs()[p]->cpu_diff(), layers[1]->blobs()[p]->cpu_diff(),
                    layers[0]->blobs()[p]->count(), tolerance, "param diff " + std::to_string(p));
  }
  ExpectRanItsEngine(*layers[1]);
}

void ExpectRanItsEngine(const Layer& layer) {
  const std::string ran = layer.Implementation();
  const std::string what = std::string(layer.type()) + " '" + layer.name() + "' ran '" + ran + "'";
  switch (layer.engine()) {
    case Engine::kReference:
      EXPECT_EQ(ran, "reference") << what;
      return;
    case Engine::kFast:
      EXPECT_TRUE(layer.HasFastPath() && ran != "reference")
          << what << ": the fast engine ran the reference path";
      return;
    case Engine::kGpu: {
      if (!layer.HasGpuPath()) {
        ADD_FAILURE() << what << ": it has no GPU path, so the GPU engine ran its CPU path";
        return;
      }
      const std::vector<std::string> cpu = layer.CpuImplementations();
      EXPECT_TRUE(ran == layer.GpuImplementation() && ran != "reference" &&
                  std::find(cpu.begin(), cpu.end(), ran) == cpu.end())
          << what << ": not its GPU implementation '" << layer.GpuImplementation() << "'";
      return;
    }
  }
}

}  // namespace pstrain::testing
