// The cuDNN paths' state: convolution with the algorithms cudnnFind*
// measured (ResNet- and AlexNet-like shapes) against the reference, and the
// descriptors of Convolution, AVE Pooling, LRN and Softmax reused from call
// to call and across Reshape (counted through CudnnDescriptorsCreated) while
// the results keep matching the reference for every shape. Skipped without
// a CUDA device; compiled only in CUDA builds.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "common/blob.hpp"
#include "common/rng.hpp"
#include "tests/cpp/layer_test_util.hpp"

#ifdef PSTRAIN_HAVE_CUDA
#include "worker/layers/cudnn_descriptors.hpp"

namespace pstrain::testing {
namespace {

using Shape = std::vector<int>;
constexpr float kTolerance = 1e-4f;

std::string Conv(const std::string& param) {
  return "name: 'conv' type: 'Convolution' convolution_param { " + param +
         " weight_filler { type: 'gaussian' std: 0.1 } bias_filler { type: 'gaussian' std: 0.5 } }";
}

void Gaussian(const BlobVec& b) {
  for (size_t i = 0; i < b.size(); ++i) BlobSet::FillGaussian(b[i], 300 + i);
}

TEST(GpuCudnnTest, ConvolutionWithMeasuredAlgorithmsAgrees) {
  PSTRAIN_SKIP_WITHOUT_GPU();
  // ResNet-50: 3x3 in a bottleneck, 1x1 with stride 2, the 7x7 stem.
  ExpectEnginesAgree(Conv("num_output: 64 kernel_size: 3 pad: 1"), {{4, 64, 28, 28}}, Gaussian,
                     kTolerance, 1, Engine::kGpu);
  ExpectEnginesAgree(Conv("num_output: 256 kernel_size: 1 stride: 2 bias_term: false"),
                     {{4, 128, 14, 14}}, Gaussian, kTolerance, 1, Engine::kGpu);
  ExpectEnginesAgree(Conv("num_output: 16 kernel_size: 7 stride: 2 pad: 3"), {{2, 3, 64, 64}},
                     Gaussian, kTolerance, 1, Engine::kGpu);
  // AlexNet: 11x11 stride 4, and a grouped 5x5.
  ExpectEnginesAgree(Conv("num_output: 16 kernel_size: 11 stride: 4"), {{2, 3, 67, 67}}, Gaussian,
                     kTolerance, 1, Engine::kGpu);
  ExpectEnginesAgree(Conv("num_output: 32 kernel_size: 5 pad: 2 group: 2"), {{2, 16, 13, 13}},
                     Gaussian, kTolerance, 1, Engine::kGpu);
}

// Runs `layer` on the reference and GPU engines through `shapes` (Reshape
// between them), forward and backward twice per shape, comparing the top
// and the bottom diff each time; returns the descriptors the GPU layer
// created at each step: [after the first shape's passes, after each
// further shape's passes].
std::vector<int64_t> RunThroughShapes(const std::string& layer, const std::vector<Shape>& shapes) {
  BlobSet bottoms[2], tops[2];
  std::unique_ptr<Layer> layers[2];
  const Engine engines[2] = {Engine::kReference, Engine::kGpu};
  std::vector<int64_t> created;
  const int64_t start = CudnnDescriptorsCreated();
  for (int e = 0; e < 2; ++e) {
    bottoms[e].Add(shapes[0]);
    tops[e].Add({});
    BlobSet::FillGaussian(bottoms[e][0], 7);
    layers[e] = MakeLayer(layer, engines[e]);
    const Status s = layers[e]->SetUp(bottoms[e].vec(), tops[e].vec());
    EXPECT_TRUE(s.ok()) << s.message();
    if (!s.ok()) return created;
  }
  for (size_t p = 0; p < layers[0]->blobs().size(); ++p) {
    layers[1]->blobs()[p]->CopyFrom(*layers[0]->blobs()[p]);
  }
  for (size_t k = 0; k < shapes.size(); ++k) {
    for (int pass = 0; pass < 2; ++pass) {
      for (int e = 0; e < 2; ++e) {
        if (k > 0 && pass == 0) {
          bottoms[e][0]->Reshape(shapes[k]);
          EXPECT_TRUE(layers[e]->Reshape(bottoms[e].vec(), tops[e].vec()).ok());
        }
        BlobSet::FillGaussian(bottoms[e][0], 11 + k);
        layers[e]->Forward(bottoms[e].vec(), tops[e].vec());
        Rng rng(20 + k);
        float* diff = tops[e][0]->mutable_cpu_diff();
        for (int64_t i = 0; i < tops[e][0]->count(); ++i) diff[i] = rng.Uniform(-1.f, 1.f);
        layers[e]->Backward(tops[e].vec(), {true}, bottoms[e].vec());
      }
      const std::string what = layer.substr(0, 40) + " at " + bottoms[0][0]->shape_string();
      EXPECT_EQ(tops[1][0]->shape(), tops[0][0]->shape()) << what;
      ExpectBlobsNear(tops[0][0]->cpu_data(), tops[1][0]->cpu_data(), tops[0][0]->count(),
                      kTolerance, "top of " + what);
      ExpectBlobsNear(bottoms[0][0]->cpu_diff(), bottoms[1][0]->cpu_diff(), bottoms[0][0]->count(),
                      kTolerance, "bottom diff of " + what);
    }
    created.push_back(CudnnDescriptorsCreated() - start);
  }
  return created;
}

TEST(GpuCudnnTest, PoolingLrnSoftmaxKeepTheirDescriptors) {
  PSTRAIN_SKIP_WITHOUT_GPU();
  const std::vector<Shape> shapes = {{2, 8, 9, 9}, {3, 8, 13, 11}, {1, 8, 5, 7}};
  struct Case {
    std::string layer;
    int64_t descriptors;  // created once per layer
  };
  const Case cases[] = {
      // AVE with windows inside the input: the cuDNN path (2 tensors + pooling).
      {"name: 'pool' type: 'Pooling' pooling_param { pool: AVE kernel_size: 3 stride: 1 pad: 1 }",
       3},
      // Cross-channel LRN in cuDNN's range: 1 tensor + LRN.
      {"name: 'norm' type: 'LRN' lrn_param { local_size: 5 alpha: 0.0001 beta: 0.75 }", 2},
      // Softmax out of place: 1 tensor.
      {"name: 'prob' type: 'Softmax'", 1},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.layer);
    const std::vector<int64_t> created = RunThroughShapes(c.layer, shapes);
    ASSERT_EQ(created.size(), shapes.size());
    for (size_t k = 0; k < created.size(); ++k) EXPECT_EQ(created[k], c.descriptors) << k;
  }
}

// Convolution rebuilds its state per bottom shape (4 descriptors: x, y,
// filter, convolution) and keeps it from call to call.
TEST(GpuCudnnTest, ConvolutionKeepsDescriptorsPerShape) {
  PSTRAIN_SKIP_WITHOUT_GPU();
  const std::vector<Shape> shapes = {{2, 4, 9, 9}, {2, 4, 9, 9}, {3, 4, 12, 10}};
  const std::vector<int64_t> created =
      RunThroughShapes(Conv("num_output: 6 kernel_size: 3 pad: 1"), shapes);
  ASSERT_EQ(created.size(), shapes.size());
  EXPECT_EQ(created[0], 4);
  EXPECT_EQ(created[1], 4);  // the same shape again: nothing new
  EXPECT_EQ(created[2], 8);
}

}  // namespace
}  // namespace pstrain::testing

#endif  // PSTRAIN_HAVE_CUDA
