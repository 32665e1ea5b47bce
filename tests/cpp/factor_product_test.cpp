// FactorProduct's ISA variants (common/ps/factor_product/) against the plain
// loop that defines its result (each element: the first product, then + each
// later product in sample order, every operation rounded to float): bit for
// bit, for every variant this CPU runs, on shapes that exercise the register
// tiles and every remainder. A worker's replica and a shard on hosts with
// different CPUs rely on it (docs/architecture.md, "Sufficient factors").
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "common/ps/factor_product/variants.hpp"
#include "common/ps/factor_rebuild.hpp"

namespace pstrain {
namespace {

// The definition, one element at a time (volatile: no compiler may fuse or
// reorder the two roundings, whatever the flags of this file).
void Reference(const float* left, const float* right, int64_t rows, int64_t samples,
               int64_t cols, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < cols; ++j) {
      volatile float o = left[r] * right[j];
      for (int64_t s = 1; s < samples; ++s) {
        volatile float p = left[s * rows + r] * right[s * cols + j];
        o = o + p;
      }
      out[r * cols + j] = o;
    }
  }
}

struct Shape {
  int64_t rows, samples, cols;
};

TEST(FactorProductTest, EveryVariantGivesTheDefinitionsFloatsBitForBit) {
  const auto variants = factor_product::SupportedVariants();
  ASSERT_GE(variants.size(), 1u);
  EXPECT_EQ(variants.front().isa, "generic");
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.f, 1.f);
  for (const Shape& shape : {Shape{1, 1, 1}, Shape{3, 1, 5}, Shape{4, 2, 16}, Shape{4, 3, 32},
                             Shape{5, 7, 33}, Shape{8, 4, 64}, Shape{9, 5, 95},
                             Shape{17, 32, 129}, Shape{64, 16, 257}, Shape{100, 32, 800}}) {
    SCOPED_TRACE(std::to_string(shape.rows) + "x" + std::to_string(shape.samples) + "x" +
                 std::to_string(shape.cols));
    std::vector<float> left(shape.samples * shape.rows), right(shape.samples * shape.cols);
    // Magnitudes spread over 2^-20..2^20, so that the order of the sums
    // shows in the last bits; some exact zeros of both signs (a first
    // product of -0 must stay -0).
    for (float& x : left) x = std::ldexp(normal(rng), static_cast<int>(rng() % 41) - 20);
    for (float& x : right) x = normal(rng);
    left[0] = -0.f;
    right[shape.cols - 1] = 0.f;
    std::vector<float> expected(shape.rows * shape.cols);
    Reference(left.data(), right.data(), shape.rows, shape.samples, shape.cols, expected.data());
    for (const auto& variant : variants) {
      SCOPED_TRACE(variant.isa);
      std::vector<float> got(expected.size(), std::nanf(""));
      variant.kernel(left.data(), shape.rows, right.data(), shape.rows, shape.samples, shape.cols,
                     got.data());
      ASSERT_EQ(std::memcmp(got.data(), expected.data(), got.size() * sizeof(float)), 0);
      // Rows [1, rows) read in place from L (stride: all the rows): rows 1..
      // of the same result.
      if (shape.rows > 1) {
        std::vector<float> tail((shape.rows - 1) * shape.cols, std::nanf(""));
        variant.kernel(left.data() + 1, shape.rows, right.data(), shape.rows - 1, shape.samples,
                       shape.cols, tail.data());
        ASSERT_EQ(std::memcmp(tail.data(), expected.data() + shape.cols,
                              tail.size() * sizeof(float)), 0);
      }
    }
    std::vector<float> chosen(expected.size());
    FactorProduct(left.data(), right.data(), shape.rows, shape.samples, shape.cols,
                  chosen.data());
    EXPECT_EQ(std::memcmp(chosen.data(), expected.data(), chosen.size() * sizeof(float)), 0);
  }
  if (std::getenv("PSTRAIN_CPU_ISA") == nullptr) {  // the widest, unless narrowed
    EXPECT_EQ(factor_product::ChosenVariant().isa, variants.back().isa);
  }
}

}  // namespace
}  // namespace pstrain
