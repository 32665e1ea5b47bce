// Gradient compression (common/transport/gradient_codec.hpp): each encoding
// against hand-computed words, error feedback, the checks a receiver makes,
// and a compressed push through Validate and ShardLoop's decoding path.
#include "common/transport/gradient_codec.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

namespace pstrain::transport {
namespace {

uint32_t WordOf(const std::vector<float>& words, size_t i) {
  uint32_t w;
  std::memcpy(&w, &words[i], 4);
  return w;
}

std::vector<float> RoundTrip(pstrain::DataType dtype, const std::vector<float>& words, size_t n) {
  EXPECT_TRUE(CheckEncoded(dtype, words.data(), words.size() * 4, n).ok());
  std::vector<float> out(n, 99.f);
  Decode(dtype, words.data(), words.size() * 4, n, out.data());
  return out;
}

TEST(GradientCodecTest, HalfConversionRoundsToNearestEven) {
  EXPECT_EQ(FloatToHalf(1.f), 0x3c00);
  EXPECT_EQ(FloatToHalf(-2.f), 0xc000);
  EXPECT_EQ(FloatToHalf(65504.f), 0x7bff);
  EXPECT_EQ(FloatToHalf(65520.f), 0x7c00);           // halfway to 65536 rounds to even: infinity
  EXPECT_EQ(FloatToHalf(1.f + 1.f / 2048), 0x3c00);  // halfway between 1 and 1+2^-10: even
  EXPECT_EQ(FloatToHalf(1.f + 3.f / 2048), 0x3c02);  // halfway, rounds up to even
  EXPECT_EQ(FloatToHalf(std::ldexp(1.f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(FloatToHalf(std::ldexp(1.f, -26)), 0x0000);
  EXPECT_EQ(FloatToHalf(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(std::nanf("")))));
  for (uint32_t h = 0; h < 0x7c00; ++h) {  // every finite half survives float and back
    ASSERT_EQ(FloatToHalf(HalfToFloat(static_cast<uint16_t>(h))), h) << h;
  }
  EXPECT_EQ(HalfToFloat(0x3555), 0.333251953125f);
}

TEST(GradientCodecTest, Fp16PacksTwoValuesAWord) {
  GradientEncoder encoder(pstrain::FLOAT16, 3, 0, true);
  std::vector<float> words;
  encoder.Encode(std::vector<float>{1.f, -2.f, 0.5f}.data(), &words);
  ASSERT_EQ(words.size(), 2u);
  EXPECT_EQ(WordOf(words, 0), 0xc0003c00u);
  EXPECT_EQ(WordOf(words, 1), 0x00003800u);
  EXPECT_EQ(RoundTrip(pstrain::FLOAT16, words, 3), (std::vector<float>{1.f, -2.f, 0.5f}));
  EXPECT_TRUE(encoder.residual().empty());  // fp16 has no error feedback
}

TEST(GradientCodecTest, TopKSendsTheLargestMagnitudesAndFeedsBackTheRest) {
  GradientEncoder encoder(pstrain::TOP_K, 5, 0.4, true);  // k = 2
  std::vector<float> words;
  encoder.Encode(std::vector<float>{0.1f, -3.f, 0.2f, 2.f, -0.3f}.data(), &words);
  ASSERT_EQ(words.size(), 5u);
  EXPECT_EQ(WordOf(words, 0), 2u);
  EXPECT_EQ(WordOf(words, 1), 1u);
  EXPECT_EQ(WordOf(words, 2), 3u);
  EXPECT_EQ(words[3], -3.f);
  EXPECT_EQ(words[4], 2.f);
  EXPECT_EQ(RoundTrip(pstrain::TOP_K, words, 5), (std::vector<float>{0, -3.f, 0, 2.f, 0}));
  EXPECT_EQ(encoder.residual(), (std::vector<float>{0.1f, 0, 0.2f, 0, -0.3f}));
  // Next push: g + residual = {0.1, 0, 0.2, 0, -0.3} + {0, 0, 0.2, 0, -0.1}.
  encoder.Encode(std::vector<float>{0, 0, 0.2f, 0, -0.1f}.data(), &words);
  EXPECT_EQ(RoundTrip(pstrain::TOP_K, words, 5), (std::vector<float>{0, 0, 0.4f, 0, -0.4f}));
  EXPECT_EQ(encoder.residual(), (std::vector<float>{0.1f, 0, 0, 0, 0}));
  GradientEncoder plain(pstrain::TOP_K, 5, 0.4, false);
  plain.Encode(std::vector<float>{0.1f, -3.f, 0.2f, 2.f, -0.3f}.data(), &words);
  EXPECT_TRUE(plain.residual().empty());
}

TEST(GradientCodecTest, SignSendsOneBitAValueAndTheMeanMagnitude) {
  GradientEncoder encoder(pstrain::SIGN_SCALED, 4, 0, true);
  std::vector<float> words;
  encoder.Encode(std::vector<float>{1.f, -2.f, 3.f, -2.f}.data(), &words);
  ASSERT_EQ(words.size(), 2u);
  EXPECT_EQ(words[0], 2.f);  // (1 + 2 + 3 + 2) / 4
  EXPECT_EQ(WordOf(words, 1), 0b0101u);
  EXPECT_EQ(RoundTrip(pstrain::SIGN_SCALED, words, 4), (std::vector<float>{2, -2, 2, -2}));
  EXPECT_EQ(encoder.residual(), (std::vector<float>{-1, 0, 1, 0}));
  std::vector<float> long_words;
  GradientEncoder wide(pstrain::SIGN_SCALED, 40, 0, false);
  std::vector<float> g(40, -1.f);
  g[33] = 1.f;
  wide.Encode(g.data(), &long_words);
  ASSERT_EQ(long_words.size(), 3u);  // scale + 2 words of bits
  EXPECT_EQ(WordOf(long_words, 2), 0b10u);
}

TEST(GradientCodecTest, ReceiverChecksNameWhatIsWrong) {
  const uint32_t topk[] = {2, 3, 1, 0, 0};  // indices not ascending
  EXPECT_EQ(CheckEncoded(pstrain::TOP_K, topk, sizeof(topk), 5).message(), "TOP_K index 1 after 3");
  const uint32_t big[] = {1, 7, 0};
  EXPECT_EQ(CheckEncoded(pstrain::TOP_K, big, sizeof(big), 5).message(), "TOP_K index 7 >= 5");
  const uint32_t many[] = {9, 0, 0};
  EXPECT_FALSE(CheckEncoded(pstrain::TOP_K, many, sizeof(many), 5).ok());
  const float half[] = {0, 0};
  EXPECT_FALSE(CheckEncoded(pstrain::FLOAT16, half, sizeof(half), 5).ok());  // needs 3 words
  const float sign[] = {-1.f, 0};
  EXPECT_NE(CheckEncoded(pstrain::SIGN_SCALED, sign, sizeof(sign), 5).message().find("scale"),
            std::string::npos);
  const float nan_sign[] = {std::nanf(""), 0};
  EXPECT_FALSE(CheckEncoded(pstrain::SIGN_SCALED, nan_sign, sizeof(nan_sign), 5).ok());
  EXPECT_FALSE(CheckEncoded(pstrain::FLOAT32, half, sizeof(half), 2).ok());
  EXPECT_EQ(ParseCompression("zip").status().message(),
            "compression \"zip\" is not one of none, fp16, bf16, topk, sign");
}

}  // namespace
}  // namespace pstrain::transport
