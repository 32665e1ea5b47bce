// ExpectRanItsEngine (layer_test_util.hpp), which ExpectEnginesAgree ends
// with: it fails, once and with the reason, for a layer whose engine ran
// another path than its own, and passes for one that ran its own. Runs
// without a GPU: the check the GPU tests rely on is itself checked here (an
// Input layer has no GPU path in any build, and no fast path).
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include "tests/cpp/layer_test_util.hpp"

namespace pstrain::testing {
namespace {

std::unique_ptr<Layer> SetUpInput(Engine engine, BlobSet& tops) {
  tops.Add({});
  auto layer = MakeLayer("name: 'in' type: 'Input' top: 'x' input_param { shape { dim: 2 dim: 3 } }",
                         engine);
  EXPECT_NE(layer, nullptr);
  if (layer == nullptr) return nullptr;
  const Status s = layer->SetUp({}, tops.vec());
  EXPECT_TRUE(s.ok()) << s.message();
  return layer;
}

TEST(ExpectRanItsEngineTest, FailsForALayerWithoutAGpuPathUnderTheGpuEngine) {
  BlobSet tops;
  auto input = SetUpInput(Engine::kGpu, tops);
  ASSERT_NE(input, nullptr);
  EXPECT_NONFATAL_FAILURE(
      ExpectRanItsEngine(*input),
      "Input 'in' ran 'reference': it has no GPU path, so the GPU engine ran its CPU path");
}

TEST(ExpectRanItsEngineTest, FailsForTheReferencePathUnderTheFastEngine) {
  BlobSet tops;
  auto input = SetUpInput(Engine::kFast, tops);
  ASSERT_NE(input, nullptr);
  EXPECT_NONFATAL_FAILURE(ExpectRanItsEngine(*input),
                          "Input 'in' ran 'reference': the fast engine ran the reference path");
}

TEST(ExpectRanItsEngineTest, PassesForTheEnginesOwnPath) {
  BlobSet tops;
  auto input = SetUpInput(Engine::kReference, tops);
  ASSERT_NE(input, nullptr);
  ExpectRanItsEngine(*input);
  BlobSet bottoms, bn_tops;
  BlobSet::FillGaussian(bottoms.Add({4, 3, 2, 2}), 1);
  bn_tops.Add({});
  auto bn = MakeLayer("name: 'bn' type: 'BatchNorm' phase: TRAIN", Engine::kFast);
  ASSERT_TRUE(bn->SetUp(bottoms.vec(), bn_tops.vec()).ok());
  bn->Forward(bottoms.vec(), bn_tops.vec());
  EXPECT_EQ(bn->Implementation(), "fast");
  ExpectRanItsEngine(*bn);
}

}  // namespace
}  // namespace pstrain::testing
