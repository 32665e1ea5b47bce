// Test support shared by every layer suite:
//  - Engine tags for typed suites: LayerEngines (reference, fast) and
//    LayerEnginesWithGpu (reference, fast, GPU); LayerEngineTest<Tag> is a
//    fixture that skips the GPU engine without a CUDA device.
//  - SkipWithoutGpu / PSTRAIN_SKIP_WITHOUT_GPU: skip a test, with the reason
//    (DeviceSummary()), when there is no CUDA device.
//  - GradientChecker: finite-difference check of Backward against Forward for
//    every bottom and every param, with the objective sum(w * top) for fixed
//    random w (so every top element's gradient path is exercised).
//  - ExpectEnginesAgree: runs the same layer on the reference path and on
//    another engine (fast by default) from the same inputs and params and
//    compares tops and all gradients, and checks the second engine ran its
//    own path (ExpectRanItsEngine, Layer::Implementation()).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/blob.hpp"
#include "common/rng.hpp"
#include "proto/caffe.pb.h"
#include "worker/layer.hpp"

namespace pstrain::testing {

struct ReferenceEngine {
  static constexpr Engine kEngine = Engine::kReference;
  static constexpr const char* kName = "Reference";
};
struct FastEngine {
  static constexpr Engine kEngine = Engine::kFast;
  static constexpr const char* kName = "Fast";
};
struct GpuEngine {
  static constexpr Engine kEngine = Engine::kGpu;
  static constexpr const char* kName = "Gpu";
};
using LayerEngines = ::testing::Types<ReferenceEngine, FastEngine>;
using LayerEnginesWithGpu = ::testing::Types<ReferenceEngine, FastEngine, GpuEngine>;
// Names a typed suite's instances by engine ("Suite/Gpu.Test", not
// "Suite/2.Test"): TYPED_TEST_SUITE(Suite, LayerEnginesWithGpu, EngineTagName),
// so that the GPU tests' filter ('*Gpu*', bench/gpu_check.sh) selects them.
struct EngineTagName {
  template <typename EngineTag>
  static std::string GetName(int) {
    return EngineTag::kName;
  }
};

// Without a CUDA device (or in a build without CUDA): records a skip of the
// current test with DeviceSummary() as the reason and returns true; the
// caller returns. Otherwise false.
bool SkipWithoutGpu();
#define PSTRAIN_SKIP_WITHOUT_GPU()                    \
  do {                                                \
    if (::pstrain::testing::SkipWithoutGpu()) return; \
  } while (0)

// Typed fixture over engine tags: tests of the GPU engine are skipped when
// there is no device. Use with TYPED_TEST_SUITE(MySuite, LayerEnginesWithGpu)
// where `template <typename T> class MySuite : public LayerEngineTest<T> {};`.
template <typename EngineTag>
class LayerEngineTest : public ::testing::Test {
 protected:
  static constexpr Engine kEngine = EngineTag::kEngine;
  void SetUp() override {
    if (kEngine == Engine::kGpu) PSTRAIN_SKIP_WITHOUT_GPU();
  }
};

// Reshapes `blob` to `shape` and copies `values` into its data (by-hand cases).
inline void Set(Blob* blob, const std::vector<int>& shape, const std::vector<float>& values) {
  blob->Reshape(shape);
  std::copy(values.begin(), values.end(), blob->mutable_cpu_data());
}
// A blob's data and diff as vectors, to compare with hand-computed values.
inline std::vector<float> Data(const Blob& b) { return {b.cpu_data(), b.cpu_data() + b.count()}; }
inline std::vector<float> Diff(const Blob& b) { return {b.cpu_diff(), b.cpu_diff() + b.count()}; }

// Owns bottom and top blobs for a layer test.
class BlobSet {
 public:
  Blob* Add(const std::vector<int>& shape);
  // Fills with values drawn from a gaussian(0, stddev) or uniform(lo, hi).
  static void FillGaussian(Blob* blob, uint64_t seed, float stddev = 1.f);
  static void FillUniform(Blob* blob, uint64_t seed, float lo, float hi);
  BlobVec vec() const;
  Blob* operator[](size_t i) const { return blobs_[i].get(); }
  size_t size() const { return blobs_.size(); }

 private:
  std::vector<std::unique_ptr<Blob>> blobs_;
};

// Creates a layer through the registry (fails the test on error) and sets the engine.
std::unique_ptr<Layer> MakeLayer(const std::string& prototxt_layer, Engine engine);
// Parses a LayerParameter from text; fails the test on a parse error.
caffe::LayerParameter ParseLayer(const std::string& text);

struct GradientCheckOptions {
  float step = 1e-2f;
  float threshold = 1e-3f;
  uint64_t seed = 1701;
  // Elements whose input lies within kink_range of kink are skipped
  // (non-differentiable points such as ReLU's 0).
  float kink = 0.f;
  float kink_range = -1.f;
  // Bottoms to check; empty means every bottom the layer allows.
  std::vector<int> bottoms;
  bool check_params = true;
};

// REQUIRES: the layer is set up with (bottom, top). Fails the test with the
// first mismatching element (blob, index, analytic, numeric).
void CheckGradients(Layer& layer, const BlobVec& bottom, const BlobVec& top,
                    const GradientCheckOptions& options = {});

// Builds the layer twice (reference and `engine`), copies params from the
// first, feeds the same bottoms, and compares top data, bottom diffs and
// param diffs. `fill` fills the bottoms (called on each engine's copy with
// the same blobs). With engine kGpu and no device the test is skipped.
// Then ExpectRanItsEngine on the second layer: a layer without a path of its
// own for `engine` would compare the reference with itself.
void ExpectEnginesAgree(const std::string& prototxt_layer,
                        const std::vector<std::vector<int>>& bottom_shapes,
                        const std::function<void(const BlobVec&)>& fill, float tolerance = 1e-4f,
                        int num_tops = 1, Engine engine = Engine::kFast);

// What `layer` reports it ran (Layer::Implementation()) is its engine's own
// path: "reference" under kReference; under kFast a fast path, not
// "reference"; under kGpu a GPU path (HasGpuPath()), its GpuImplementation()
// and none of its CPU implementations' names. Read after a Forward/Backward
// (Convolution names its cuDNN API once it ran).
void ExpectRanItsEngine(const Layer& layer);

// Element-wise |a-b| <= tol * max(1, |a|, |b|).
void ExpectBlobsNear(const float* a, const float* b, int64_t n, float tol,
                     const std::string& what);

}  // namespace pstrain::testing
