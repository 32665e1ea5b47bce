// 16-bit on the wire both ways (transport.compression fp16|bf16 for pushes,
// transport.pull_compression for pulls): the bf16 and fp16 roundings against
// hand-computed bits, EncodeHalves, the HELLO negotiation and its refusal by
// an older server, Validate's dtype rule, and a shard's 16-bit pull reply
// against the rounding of its float32 master weights (which stay float32).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "common/transport/gradient_codec.hpp"
#include "common/transport/protocol.hpp"
#include "common/transport/validate.hpp"
#include "tests/cpp/shard_state_test_util.hpp"
#include "tests/cpp/transport_test_util.hpp"

namespace pstrain {
namespace {

using namespace server::test_support;  // NOLINT: the shard suites' net and messages
using server::Outgoing;
using transport::BFloat16ToFloat;
using transport::FloatToBFloat16;
using transport::FloatToHalf;
using transport::HalfToFloat;

float FromBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
uint32_t WordOf(const std::vector<float>& words, size_t i) {
  uint32_t w;
  std::memcpy(&w, &words[i], 4);
  return w;
}

TEST(PullCompressionCodecTest, Fp16RoundsToNearestEven) {
  // 1/3 = 0x3eaaaaab: mantissa 0x2aaaab, the dropped 13 bits 0x0aab < half: down.
  EXPECT_EQ(FloatToHalf(1.f / 3), 0x3555);
  EXPECT_EQ(HalfToFloat(0x3555), 0.333251953125f);
  EXPECT_EQ(FloatToHalf(65504.f), 0x7bff);                   // the largest half
  EXPECT_EQ(FloatToHalf(65519.99f), 0x7bff);                 // below the halfway point
  EXPECT_EQ(FloatToHalf(65520.f), 0x7c00);                   // halfway: even is infinity
  EXPECT_EQ(FloatToHalf(std::ldexp(1.f, -24)), 0x0001);      // smallest subnormal
  EXPECT_EQ(FloatToHalf(std::ldexp(1.f, -25)), 0x0000);      // half of it: ties to even 0
  EXPECT_EQ(FloatToHalf(3 * std::ldexp(1.f, -25)), 0x0002);  // 1.5 units: ties to even 2
  EXPECT_EQ(FloatToHalf(-std::ldexp(1023.f, -24)), 0x83ff);  // largest subnormal, negative
  EXPECT_EQ(HalfToFloat(0x0001), std::ldexp(1.f, -24));
}

TEST(PullCompressionCodecTest, Bf16RoundsToNearestEvenAndKeepsNaN) {
  // 1/3 = 0x3eaaaaab: the dropped half 0xaaab > 0x8000: up to 0x3eab.
  EXPECT_EQ(FloatToBFloat16(1.f / 3), 0x3eab);
  EXPECT_EQ(BFloat16ToFloat(0x3eab), 0.333984375f);
  EXPECT_EQ(FloatToBFloat16(1.f), 0x3f80);
  EXPECT_EQ(FloatToBFloat16(FromBits(0x3f808000)), 0x3f80);  // 1 + 2^-8: tie, even stays
  EXPECT_EQ(FloatToBFloat16(FromBits(0x3f818000)), 0x3f82);  // 1 + 3*2^-8: tie, up to even
  EXPECT_EQ(FloatToBFloat16(FromBits(0x3f808001)), 0x3f81);  // just past the tie: up
  EXPECT_EQ(FloatToBFloat16(65504.f), 0x4780);  // 0x477fe000: up, to 65536 (finite here)
  EXPECT_EQ(BFloat16ToFloat(0x4780), 65536.f);
  EXPECT_EQ(FloatToBFloat16(65280.f), 0x477f);  // exact
  EXPECT_EQ(FloatToBFloat16(-2.f), 0xc000);
  // Subnormals: 0x00010000 = 2^-133 is the smallest bf16 subnormal.
  EXPECT_EQ(FloatToBFloat16(std::ldexp(1.f, -133)), 0x0001);
  EXPECT_EQ(FloatToBFloat16(std::ldexp(1.f, -134)), 0x0000);      // tie to even 0
  EXPECT_EQ(FloatToBFloat16(3 * std::ldexp(1.f, -134)), 0x0002);  // tie to even 2
  EXPECT_EQ(BFloat16ToFloat(0x0001), std::ldexp(1.f, -133));
  // The range: the largest bf16 is 0x7f7f; past its halfway point, infinity.
  EXPECT_EQ(FloatToBFloat16(FromBits(0x7f7f7fff)), 0x7f7f);
  EXPECT_EQ(FloatToBFloat16(FromBits(0x7f7f8000)), 0x7f80);  // tie: even is infinity
  EXPECT_EQ(FloatToBFloat16(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(FloatToBFloat16(-std::numeric_limits<float>::infinity()), 0xff80);
  // NaN stays NaN (quiet), sign kept, even one whose payload lies in the dropped bits.
  EXPECT_EQ(FloatToBFloat16(FromBits(0x7f800001)), 0x7fc0);
  EXPECT_EQ(FloatToBFloat16(FromBits(0xff800001)), 0xffc0);
  EXPECT_EQ(FloatToBFloat16(FromBits(0x7fffffff)), 0x7fff);
  EXPECT_TRUE(std::isnan(BFloat16ToFloat(FloatToBFloat16(std::nanf("")))));
  for (uint32_t h = 0; h < 0x7f80; ++h) {  // every finite bf16 survives float and back
    ASSERT_EQ(FloatToBFloat16(BFloat16ToFloat(static_cast<uint16_t>(h))), h) << h;
  }
}

TEST(PullCompressionCodecTest, EncodeHalvesPacksAndReportsTheFirstOverflow) {
  const std::vector<float> values = {1.f / 3, 65504.f, 70000.f, -1.f, 1e30f};
  std::vector<float> words;
  EXPECT_EQ(transport::EncodeHalves(FLOAT16, values.data(), values.size(), &words), 2u);
  ASSERT_EQ(words.size(), 3u);
  EXPECT_EQ(WordOf(words, 0), 0x7bff3555u);
  EXPECT_EQ(WordOf(words, 1), 0xbc007c00u);  // 70000 became infinity; -1
  EXPECT_EQ(WordOf(words, 2), 0x00007c00u);  // 1e30: infinity; the odd tail pads with 0
  EXPECT_EQ(transport::EncodeHalves(BFLOAT16, values.data(), values.size(), &words), 5u);
  std::vector<float> decoded(values.size());
  ASSERT_TRUE(transport::CheckEncoded(BFLOAT16, words.data(), words.size() * 4, 5).ok());
  transport::Decode(BFLOAT16, words.data(), words.size() * 4, 5, decoded.data());
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(decoded[i], BFloat16ToFloat(FloatToBFloat16(values[i]))) << i;
  }
  EXPECT_EQ(decoded[0], 0.333984375f);
  EXPECT_EQ(decoded[2], 70144.f);  // 0x4789 0x4788: 70000 = 0x4788b800, up
  // An infinity or NaN in is not an overflow: it stays what it is.
  const std::vector<float> special = {std::numeric_limits<float>::infinity(), std::nanf("")};
  EXPECT_EQ(transport::EncodeHalves(FLOAT16, special.data(), 2, &words), 2u);
  EXPECT_EQ(transport::CheckEncoded(BFLOAT16, words.data(), 4, 3).message(),
            "BFLOAT16 payload has 4 bytes, 3 values need 8");
}

TEST(PullCompressionCodecTest, Bf16PushesHaveNoErrorFeedback) {
  transport::GradientEncoder encoder(BFLOAT16, 3, 0, true);
  std::vector<float> words;
  encoder.Encode(std::vector<float>{1.f / 3, -2.f, 0.5f}.data(), &words);
  ASSERT_EQ(words.size(), 2u);
  EXPECT_EQ(WordOf(words, 0), 0xc0003eabu);
  EXPECT_EQ(WordOf(words, 1), 0x00003f00u);
  EXPECT_TRUE(encoder.residual().empty());
}

TEST(PullCompressionCodecTest, NamesParse) {
  EXPECT_EQ(transport::ParseCompression("bf16").value(), BFLOAT16);
  EXPECT_STREQ(transport::CompressionName(BFLOAT16), "bf16");
  EXPECT_EQ(transport::ParseCompression("int8").status().message(),
            "compression \"int8\" is not one of none, fp16, bf16, topk, sign");
  EXPECT_EQ(transport::ParsePullCompression("none").value(), FLOAT32);
  EXPECT_EQ(transport::ParsePullCompression("fp16").value(), FLOAT16);
  EXPECT_EQ(transport::ParsePullCompression("bf16").value(), BFLOAT16);
  EXPECT_EQ(transport::ParsePullCompression("topk").status().message(),
            "pull compression \"topk\" is not one of none, fp16, bf16");
}

TEST(PullCompressionProtocolTest, HelloAsksAndHelloAckGrants) {
  const transport::Origin worker{WORKER, 1, 9}, server{SERVER, 0, 9};
  const Header plain = transport::HelloHeader(worker, 2);
  EXPECT_FALSE(plain.has_pull_dtype());  // old servers see exactly what they saw before
  const Header hello = transport::HelloHeader(worker, 2, FLOAT16);
  EXPECT_EQ(hello.pull_dtype(), FLOAT16);
  const Header ack = transport::HelloAckHeader(server, hello, 0, 0, ConsistencyMode::kBsp, 2);
  EXPECT_EQ(ack.pull_dtype(), FLOAT16);
  EXPECT_TRUE(transport::ReadHelloAck(ack, FLOAT16).ok());
  EXPECT_FALSE(
      transport::HelloAckHeader(server, plain, 0, 0, ConsistencyMode::kBsp, 2).has_pull_dtype());
  // A server from before 16-bit pulls ignores field 18 and answers without it.
  Header old_ack = ack;
  old_ack.clear_pull_dtype();
  const Status refused = transport::ReadHelloAck(old_ack, FLOAT16).status();
  EXPECT_EQ(refused.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(refused.message(),
            "HELLO_ACK: this worker asked for FLOAT16 pulls and the server does not send them (a "
            "ps-server from before 16-bit pulls); run the same version everywhere, or pull in "
            "FLOAT32 (transport.pull_compression: none)");
  EXPECT_EQ(transport::ReadHelloAck(ack, BFLOAT16).status().message(),
            "HELLO_ACK: the server will send FLOAT16 pulls, this worker asked for BFLOAT16");
}

TEST(PullCompressionProtocolTest, ValidateAllowsHalfWidthPullRepliesOnly) {
  transport::ValidationRules rules;
  transport::InMessage reply;
  reply.header = testing::MakeHeader(PULL_REPLY, 0, 3, {{0, 4}});
  reply.header.set_role(SERVER);
  reply.header.set_version(3);
  reply.header.set_reply_chunks_total(1);
  reply.header.set_dtype(BFLOAT16);
  reply.frames.emplace_back(8);  // 4 values, 2 words
  reply.AlignPayloads();
  EXPECT_TRUE(transport::Validate(reply, rules).ok())
      << transport::Validate(reply, rules).message();
  reply.header.set_dtype(FLOAT16);
  EXPECT_TRUE(transport::Validate(reply, rules).ok());
  reply.header.set_dtype(TOP_K);
  EXPECT_EQ(transport::Validate(reply, rules).message(),
            "dtype TOP_K in a PULL_REPLY (only a PUSH may be compressed, and a PULL_REPLY be "
            "FLOAT16 or BFLOAT16)");
  transport::InMessage hello;
  hello.header = transport::HelloHeader({WORKER, 0, 0}, 1, SIGN_SCALED);
  EXPECT_EQ(transport::Validate(hello, rules).message(),
            "pull_dtype SIGN_SCALED (a pull is FLOAT32, FLOAT16 or BFLOAT16)");
  transport::InMessage pull;
  pull.header = transport::PullHeader({WORKER, 0, 0}, 0);
  pull.header.set_pull_dtype(FLOAT16);
  EXPECT_EQ(transport::Validate(pull, rules).message(), "pull_dtype in a PULL");
}

// The payload of `reply`'s chunk i as float32, decoded from its dtype.
std::vector<float> Decoded(const server::Outgoing& reply, int i) {
  const auto& words = *reply.payloads[static_cast<size_t>(i)];
  if (reply.header.dtype() == FLOAT32) return words;
  const uint64_t n = reply.header.chunks(i).length();
  std::vector<float> out(n);
  EXPECT_TRUE(
      transport::CheckEncoded(reply.header.dtype(), words.data(), words.size() * 4, n).ok());
  transport::Decode(reply.header.dtype(), words.data(), words.size() * 4, n, out.data());
  return out;
}

float Rounded(DataType dtype, float v) {
  return dtype == FLOAT16 ? HalfToFloat(FloatToHalf(v)) : BFloat16ToFloat(FloatToBFloat16(v));
}

// Workers 0 and 3 pull in fp16, worker 1 in bf16, worker 2 in float32, on
// one bsp shard: each reply is the rounding of the float32 master (the fp16
// workers served by one step share one encoding), and the masters follow
// the hand-computed float32 steps, never the rounded values.
TEST(PullCompressionShardTest, EachWorkerGetsTheRoundingOfTheFloat32Master) {
  constexpr int kWorkers = 4;
  Shard s(Config(ConsistencyMode::kBsp, kWorkers));
  const DataType dtypes[kWorkers] = {FLOAT16, BFLOAT16, FLOAT32, FLOAT16};
  for (int w = 0; w < kWorkers; ++w) {
    Message hello = Hello(w, kWorkers);
    if (dtypes[w] != FLOAT32) hello.header().set_pull_dtype(dtypes[w]);
    auto out = s.Send(hello);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].header.has_pull_dtype(), dtypes[w] != FLOAT32);
  }
  EXPECT_NE(std::find(s.logs.begin(), s.logs.end(), "shard 0: worker 0 pulls in FLOAT16"), s.logs.end());
  ASSERT_EQ(Count(s.Send(Init(0, 1)), INIT_ACK), 1);
  std::vector<double> hand(kInitial.begin(), kInitial.end()), velocity(kValues, 0.0);
  std::vector<Outgoing> replies;
  for (int w = 0; w < kWorkers; ++w) {
    for (auto& o : s.Send(Pull(w, 0))) replies.push_back(std::move(o));
  }
  for (int64_t t = 0; t < 4; ++t) {
    const std::vector<float> master = s.Weights();
    for (int w = 0; w < kWorkers; ++w) {
      const Outgoing* reply = Find(replies, PULL_REPLY, "w" + std::to_string(w));
      ASSERT_NE(reply, nullptr) << "worker " << w << " iteration " << t;
      EXPECT_EQ(reply->header.dtype(), dtypes[w]);
      ASSERT_EQ(reply->header.chunks_size(), 3);
      for (int i = 0; i < reply->header.chunks_size(); ++i) {
        const uint32_t id = reply->header.chunks(i).id();
        EXPECT_EQ(reply->payloads[static_cast<size_t>(i)]->size(),
                  dtypes[w] == FLOAT32 ? static_cast<size_t>(Length(id))
                                       : static_cast<size_t>(Length(id) + 1) / 2);
        const std::vector<float> got = Decoded(*reply, i);
        for (int64_t j = 0; j < Length(id); ++j) {
          const float m = master[static_cast<size_t>(Offset(id) + j)];
          EXPECT_EQ(got[static_cast<size_t>(j)], dtypes[w] == FLOAT32 ? m : Rounded(dtypes[w], m))
              << "worker " << w << " t " << t << " value " << Offset(id) + j;
        }
      }
    }
    if (t > 0) {  // answered together when the step was applied: one fp16 encoding
      EXPECT_EQ(Find(replies, PULL_REPLY, "w0")->payloads[0],
                Find(replies, PULL_REPLY, "w3")->payloads[0]);
    }
    // The next pulls wait for this step, then go out with its last push.
    replies.clear();
    for (int w = 0; w < kWorkers; ++w) EXPECT_TRUE(s.Send(Pull(w, t + 1)).empty());
    for (int w = 0; w < kWorkers; ++w) {
      for (auto& o : s.Send(Push(w, t, {0, 1, 2}))) replies.push_back(std::move(o));
    }
    EXPECT_EQ(Count(replies, PULL_REPLY), kWorkers);
    for (size_t i = 0; i < kValues; ++i) {
      double avg = 0;
      for (int w = 0; w < kWorkers; ++w) avg += Grad(w, t, static_cast<int>(i));
      velocity[i] = 0.9 * velocity[i] + 0.1 * avg / kWorkers;
      hand[i] -= velocity[i];
    }
    const std::vector<float> after = s.Weights();
    int inexact_in_fp16 = 0;
    for (size_t i = 0; i < kValues; ++i) {
      EXPECT_NEAR(after[i], hand[i], 1e-5) << i;
      inexact_in_fp16 += Rounded(FLOAT16, after[i]) != after[i];
    }
    EXPECT_GT(inexact_in_fp16, 0) << "the masters after step " << t << " are all fp16 values";
  }
}

TEST(PullCompressionShardTest, AWeightBeyondFp16RangeRefusesThePullNamingIt) {
  Shard s(Config(ConsistencyMode::kAsp, 2));
  Message hello0 = Hello(0, 2), hello1 = Hello(1, 2);
  hello0.header().set_pull_dtype(FLOAT16);
  hello1.header().set_pull_dtype(BFLOAT16);
  s.Send(hello0);
  s.Send(hello1);
  Message init(INIT_PUSH, 0, 0);
  for (const auto& p : Params()) *init.header().add_params() = p;
  init.Chunk(0, {1, 70000, 3, -65520});
  init.Chunk(1, {5, 6});
  init.Chunk(2, {0.5f, -0.5f});
  s.Send(init);
  auto out = s.Send(Pull(0, 0));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].header.type(), ERROR);
  EXPECT_EQ(out[0].peer, "w0");
  EXPECT_EQ(out[0].header.clock(), 0);
  EXPECT_EQ(out[0].header.text(),
            "weight w[1] = 70000 is beyond FLOAT16's range (|w| < 65520 rounds to a finite "
            "value): it cannot be pulled as FLOAT16; pull in bf16 or none");
  EXPECT_EQ(s.Send(Pull(0, 0)).size(), 1u);  // the refused pull is over: no double answer
  // bf16 carries it (rounded: 70000 -> 70144).
  out = s.Send(Pull(1, 0));
  const Outgoing* reply = Find(out, PULL_REPLY);
  ASSERT_NE(reply, nullptr);
  EXPECT_EQ(Decoded(*reply, 0), (std::vector<float>{1, 70144, 3, -65536}));
  EXPECT_EQ(s.server.Stats().bad_messages(), 0);  // the weights are not a bad message
}

}  // namespace
}  // namespace pstrain
