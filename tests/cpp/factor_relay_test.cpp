// The factor relay (sufficient-factor broadcasting): its geometry and
// Validate's reasons for a malformed relay or history (common/ps/factor_relay.hpp),
// and a bsp ShardState keeping the factors of relay pushes and answering a
// PULL's broadcast weight with every worker's factors, frame for frame, with
// its history for a replica's start, and its refusals.
#include "common/ps/factor_relay.hpp"

#include <gtest/gtest.h>

#include <cstring>

#include "common/ps/sufficient_factors.hpp"
#include "common/transport/validate.hpp"
#include "tests/cpp/shard_state_test_util.hpp"

namespace pstrain {
namespace {

using server::Outgoing;
using server::test_support::kT0;
using server::test_support::Message;

// Parameter 0: 12 values, rows of 3 (4 x 3); parameter 1: 4 values. Chunks
// of 4 values over 2 shards: 0 [0,4) shard 0, 1 [4,8) shard 1, 2 [8,12)
// shard 0, 3 (param 1) shard 1. Shard 0's chunks of param 0 touch rows 0-3
// (L width 4), shard 1's rows 1-2 (width 2).
KeyPlacement TwoShards() { return server::test_support::FactorTwoShards(); }

TEST(FactorRelayTest, ChunksShardsHoldersAndBytes) {
  const KeyPlacement p = TwoShards();
  EXPECT_EQ(ParamChunksOn(p, 0, 0), (std::vector<uint32_t>{0, 2}));
  EXPECT_EQ(ParamChunksOn(p, 0, 1), (std::vector<uint32_t>{1}));
  EXPECT_EQ(ParamShards(p, 0), (std::vector<int>{0, 1}));
  EXPECT_EQ(ParamShards(p, 1), (std::vector<int>{1}));
  EXPECT_EQ(RelayHolder(p, 0, 0), 0);
  EXPECT_EQ(RelayHolder(p, 0, 1), 1);
  EXPECT_EQ(RelayHolder(p, 0, 2), 0);
  EXPECT_EQ(RelayHolder(p, 1, 1), 1);
  // 3 workers x 5 samples x (L widths 4 + 2, R 3 once) x 4 bytes.
  EXPECT_EQ(RelayBytes(p, 0, 3, 5, 3, pstrain::FLOAT32), 3 * 5 * (4 + 2 + 3) * 4);
  // 16 bits: per worker, frames of 20, 10 and 15 values = 10, 5 and 8 words.
  EXPECT_EQ(RelayBytes(p, 0, 3, 5, 3, pstrain::FLOAT16), 3 * (10 + 5 + 8) * 4);
  EXPECT_EQ(RelayBytes(p, 0, 3, 5, 3, pstrain::BFLOAT16), 276);
}

class RelayValidateTest : public ::testing::Test {
 protected:
  // Shard 0's relay of parameter 0 for 2 workers, 2 samples: worker 0 with
  // its R (shard 0 holds it), worker 1 without (shard 1 does).
  void SetUp() override {
    placement_ = TwoShards();
    h_ = server::test_support::FactorRelayReply([](uint32_t w) { return w == 0; });
    frames_ = {2 * 4 * 4, 2 * 3 * 4, 2 * 4 * 4};
  }
  std::string Reason() {
    return server::test_support::FactorTwoShardsReason(h_, frames_, placement_, pstrain::WORKER,
                                                       0);
  }
  KeyPlacement placement_;
  pstrain::Header h_;
  std::vector<size_t> frames_;
};

TEST_F(RelayValidateTest, AcceptsAGoodRelayAndNamesEachFault) {
  EXPECT_EQ(Reason(), "");
  frames_[0] = 28;
  EXPECT_EQ(Reason(), "relay: parameter 0: worker 0's L has 28 bytes, 2 x 4 float32 need 32");
  SetUp();
  frames_[1] = 20;
  EXPECT_EQ(Reason(), "relay: parameter 0: worker 0's R has 20 bytes, 2 x 3 float32 need 24");
  SetUp();
  h_.mutable_relay()->RemoveLast();
  frames_.pop_back();
  EXPECT_EQ(Reason(), "relay: parameter 0 has the factors of 1 workers, the job has 2");
  SetUp();
  h_.mutable_relay(1)->set_worker(2);
  EXPECT_EQ(Reason(), "relay: parameter 0: worker 2 is not in this job (2 workers)");
  SetUp();
  h_.mutable_relay(1)->set_worker(0);
  EXPECT_EQ(Reason(), "relay: parameter 0: worker 0 twice");
  SetUp();
  h_.mutable_relay(1)->set_right(true);
  frames_.push_back(24);
  EXPECT_EQ(Reason(), "relay: parameter 0: worker 1's R comes from server 0 (its holder is "
                      "server 1)");
  SetUp();
  frames_.pop_back();
  EXPECT_EQ(Reason(), "header lists 0 chunks, 0 history chunks and 2 relayed factors, but 2 "
                      "payload frames follow");
  SetUp();
  h_.mutable_relayed_chunks()->RemoveLast();
  EXPECT_EQ(Reason(), "relay: chunk 2 of parameter 0 is not listed as relayed");
  SetUp();
  h_.add_relayed_chunks(1);
  EXPECT_EQ(Reason(), "relay: chunk 1 is held by shard 1, not shard 0");
  SetUp();
  h_.mutable_relay(0)->set_cols(5);
  EXPECT_EQ(Reason(), "relay: parameter 0: 2 samples, rows of 5 for its 12 values");
  SetUp();
  h_.set_relay_scale(0.f);
  EXPECT_EQ(Reason(), "relay: scale 0.000000 (a finite number > 0)");
  SetUp();
  h_.set_type(pstrain::PUSH);
  EXPECT_EQ(CheckRelay(h_, frames_, &placement_, 0, 2).message(),
            "relay or history frames in a PUSH (only a PULL_REPLY carries them)");
  h_.clear_relay();
  h_.clear_relayed_chunks();
  h_.clear_relay_scale();
  h_.add_broadcast(0);
  EXPECT_EQ(CheckRelay(h_, {}, &placement_, 0, 2).message(),
            "broadcast or history_params in a PUSH (only a PULL asks for them)");
  h_.set_type(pstrain::PULL);
  h_.add_history_params(2);
  EXPECT_EQ(CheckRelay(h_, {}, &placement_, 0, 2).message(), "PULL asks for parameter 2 of 2");
}

TEST_F(RelayValidateTest, SixteenBitFactorsAreCheckedInTheirOwnDtype) {
  // Worker 0 relayed in FLOAT16 (L 2 x 4 = 4 words, R 2 x 3 = 3 words),
  // worker 1 in BFLOAT16; the reply's own dtype (its chunk frames) is apart.
  h_.mutable_relay(0)->set_dtype(pstrain::FLOAT16);
  h_.mutable_relay(1)->set_dtype(pstrain::BFLOAT16);
  frames_ = {16, 12, 16};
  EXPECT_EQ(Reason(), "");
  frames_[1] = 24;  // R in float32's size
  EXPECT_EQ(Reason(), "relay: parameter 0: worker 0's R has 24 bytes, 2 x 3 FLOAT16 need 12");
  frames_ = {16, 12, 32};
  EXPECT_EQ(Reason(), "relay: parameter 0: worker 1's L has 32 bytes, 2 x 4 BFLOAT16 need 16");
  frames_ = {16, 12, 16};
  h_.mutable_relay(1)->set_dtype(pstrain::TOP_K);
  EXPECT_EQ(Reason(),
            "relay: parameter 0: worker 1's factors in TOP_K (they travel as FLOAT32, "
            "FLOAT16 or BFLOAT16)");
  // A dtype this version does not know (proto2 keeps it among the unknown fields).
  h_.mutable_relay(1)->clear_dtype();
  h_.mutable_relay(1)
      ->GetReflection()
      ->MutableUnknownFields(h_.mutable_relay(1))
      ->AddVarint(pstrain::RelayedFactors::kDtypeFieldNumber, 99);
  EXPECT_EQ(Reason(),
            "relay: parameter 0: worker 1's factors in an unknown dtype (they travel "
            "as FLOAT32, FLOAT16 or BFLOAT16)");
}

TEST_F(RelayValidateTest, HistoryFramesAreCheckedChunkBySlot) {
  h_.clear_relay();
  h_.clear_relayed_chunks();
  h_.clear_relay_scale();
  h_.set_history_slots(2);
  h_.add_history_chunks(0);
  h_.add_history_chunks(2);
  frames_ = {16, 16, 16, 16};
  EXPECT_EQ(Reason(), "");
  frames_[3] = 12;
  EXPECT_EQ(Reason(), "history: slot 1 of chunk 2 has 12 bytes, the chunk needs 16");
  frames_[3] = 16;
  h_.set_history_slots(5);
  frames_.resize(10, 16);
  EXPECT_EQ(Reason(), "history: 5 slots (1 to 4)");
}

// A bsp shard of the 2-shard placement (shard 0), 2 workers.
class ShardRelayTest : public ::testing::Test {
 protected:
  void Start(ConsistencyMode mode = ConsistencyMode::kBsp) {
    placement_ = TwoShards();
    server::ShardConfig c = server::test_support::Config(mode, 2, 0, 0, 2);
    shard_.emplace(std::move(c));
    Message init(pstrain::INIT_PUSH, 0, 0);
    server::test_support::AddFactorNetParams(&init);
    init.Chunk(0, {1, 2, 3, 4});
    init.Chunk(2, {9, 10, 11, 12});
    Send(init);
  }
  // As the shard loop hands a factor PUSH on: its frames as they came, in
  // `dtype`, the payloads rebuilt float32 chunks (header.dtype FLOAT32).
  std::vector<Outgoing> Send(Message& m, const float* left = nullptr, const float* right = nullptr,
                             pstrain::DataType dtype = pstrain::FLOAT32) {
    server::Incoming in = m.get();
    in.factor_left = left;
    in.factor_right = right;
    in.factor_dtype = dtype;
    return shard_->Handle(in, kT0);
  }
  // Worker w's factor push of step t (2 samples; L over rows 0-3, R 2 x 3):
  // the payloads are its rebuilt chunks, as the shard loop hands them on.
  std::vector<Outgoing> PushFactors(int w, int64_t t, bool relay) {
    left_[w] = {1.f + w, 2, 3, 4, 5, 6, 7, 8.f + t};
    right_[w] = {0.5f, 1, 1.5f + w, 2, 2.5f, 3.f + t};
    Message push(pstrain::PUSH, w, t);
    pstrain::FactorShape* f = push.header().mutable_factors();
    f->set_samples(2);
    f->set_row_begin(0);
    f->set_row_end(4);
    f->set_cols(3);
    if (relay) f->set_relay(true);
    push.Chunk(0, {0.01f, 0.02f, 0.03f, 0.04f});
    push.Chunk(2, {0.05f, 0.06f, 0.07f, 0.08f});
    return Send(push, left_[w].data(), right_[w].data());
  }
  // As PushFactors, the factors in FLOAT16 as a worker pushing fp16 sends
  // them (L 2 x 4 = 8 halves in 4 words, R 2 x 3 = 6 halves in 3 words).
  std::vector<Outgoing> PushHalfFactors(int w, int64_t t) {
    left_[w] = {1.f + w, 2, 3, 4, 5, 6, 7, 8.f + t};
    right_[w] = {0.5f, 1, 1.5f + w, 2, 2.5f, 3.f + t};
    // Hand-encoded binary16 (value 2j in the low half of word j): 1 = 0x3c00,
    // 2 = 0x4000, 3 = 0x4200, 4 = 0x4400, 5 = 0x4500, 6 = 0x4600, 7 = 0x4700,
    // 8 = 0x4800, 9 = 0x4880, 0.5 = 0x3800, 1.5 = 0x3e00, 2.5 = 0x4100.
    const uint16_t l0 = w == 0 ? 0x3c00 : 0x4000, l7 = t == 0 ? 0x4800 : 0x4880;
    const uint16_t r2 = w == 0 ? 0x3e00 : 0x4100, r5 = t == 0 ? 0x4200 : 0x4400;
    left_words_[w] = {Word(l0, 0x4000), Word(0x4200, 0x4400), Word(0x4500, 0x4600),
                      Word(0x4700, l7)};
    right_words_[w] = {Word(0x3800, 0x3c00), Word(r2, 0x4000), Word(0x4100, r5)};
    Message push(pstrain::PUSH, w, t);
    pstrain::FactorShape* f = push.header().mutable_factors();
    f->set_samples(2);
    f->set_row_begin(0);
    f->set_row_end(4);
    f->set_cols(3);
    f->set_relay(true);
    push.Chunk(0, {0.01f, 0.02f, 0.03f, 0.04f});
    push.Chunk(2, {0.05f, 0.06f, 0.07f, 0.08f});
    return Send(push, left_words_[w].data(), right_words_[w].data(), pstrain::FLOAT16);
  }
  static float Word(uint16_t lo, uint16_t hi) {
    const uint32_t w = static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
    float f;
    std::memcpy(&f, &w, 4);
    return f;
  }
  static std::vector<uint32_t> Words(const std::vector<float>& v) {
    std::vector<uint32_t> words(v.size());
    std::memcpy(words.data(), v.data(), v.size() * 4);
    return words;
  }
  Outgoing PullReply(int w, int64_t t, std::vector<uint32_t> broadcast,
                     std::vector<uint32_t> history = {}) {
    Message pull(pstrain::PULL, w, t);
    for (uint32_t p : broadcast) pull.header().add_broadcast(p);
    for (uint32_t p : history) pull.header().add_history_params(p);
    std::vector<Outgoing> out = Send(pull);
    EXPECT_EQ(out.size(), 1u);
    return out.empty() ? Outgoing{} : out[0];
  }
  static std::vector<float> Values(const Outgoing& o, size_t i) { return *o.payloads[i]; }

  KeyPlacement placement_;
  std::optional<server::ShardState> shard_;
  std::vector<float> left_[2], right_[2];
  std::vector<float> left_words_[2], right_words_[2];  // PushHalfFactors's frames
};

TEST_F(ShardRelayTest, APullOfABroadcastWeightCarriesEveryWorkersFactors) {
  Start();
  PushFactors(0, 0, true);
  PushFactors(1, 0, true);
  ASSERT_EQ(shard_->version(), 1);
  const Outgoing reply = PullReply(1, 1, {0});
  ASSERT_EQ(reply.header.type(), pstrain::PULL_REPLY) << reply.header.text();
  EXPECT_EQ(reply.header.chunks_size(), 0);  // no weights of parameter 0
  EXPECT_EQ(reply.header.relay_scale(), 0.5f);
  EXPECT_EQ(std::vector<uint32_t>(reply.header.relayed_chunks().begin(),
                                  reply.header.relayed_chunks().end()),
            (std::vector<uint32_t>{0, 2}));
  ASSERT_EQ(reply.header.relay_size(), 2);
  EXPECT_TRUE(reply.header.relay(0).right());   // shard 0 holds worker 0's R
  EXPECT_FALSE(reply.header.relay(1).right());  // shard 1 holds worker 1's
  EXPECT_EQ(reply.header.relay(1).worker(), 1u);
  ASSERT_EQ(reply.payloads.size(), 3u);
  EXPECT_EQ(Values(reply, 0), left_[0]);
  EXPECT_EQ(Values(reply, 1), right_[0]);
  EXPECT_EQ(Values(reply, 2), left_[1]);
  EXPECT_EQ(transport::PayloadFrames(reply.header), 3u);

  // With history: weights of version 1 and the momentum history, slot by chunk.
  const Outgoing dense = PullReply(0, 1, {}, {0});
  ASSERT_EQ(dense.header.chunks_size(), 2);
  EXPECT_EQ(dense.header.history_slots(), 1u);
  ASSERT_EQ(dense.payloads.size(), 4u);
  const auto history = shard_->store()->history(2, 0);
  EXPECT_EQ(Values(dense, 3), std::vector<float>(history.begin(), history.end()));
  EXPECT_NE(Values(dense, 3)[0], 0.f);
}

TEST_F(ShardRelayTest, SixteenBitFactorsAreRelayedByteForByteInTheirDtype) {
  Start();
  PushHalfFactors(0, 0);
  PushHalfFactors(1, 0);
  ASSERT_EQ(shard_->version(), 1);
  const Outgoing reply = PullReply(1, 1, {0});
  ASSERT_EQ(reply.header.type(), pstrain::PULL_REPLY) << reply.header.text();
  EXPECT_EQ(reply.header.dtype(), pstrain::FLOAT32);  // the reply's chunk frames
  ASSERT_EQ(reply.header.relay_size(), 2);
  EXPECT_EQ(reply.header.relay(0).dtype(), pstrain::FLOAT16);
  EXPECT_EQ(reply.header.relay(1).dtype(), pstrain::FLOAT16);
  ASSERT_EQ(reply.payloads.size(), 3u);
  // The words as pushed, not re-encoded: 4 words of L, 3 of R.
  EXPECT_EQ(Words(Values(reply, 0)),
            (std::vector<uint32_t>{0x40003c00, 0x44004200, 0x46004500, 0x48004700}));
  EXPECT_EQ(Words(Values(reply, 1)), (std::vector<uint32_t>{0x3c003800, 0x40003e00, 0x42004100}));
  EXPECT_EQ(Words(Values(reply, 2)), Words(left_words_[1]));
  // Each decodes to the worker's values: what the shard rebuilt from.
  std::vector<float> decoded;
  const std::vector<float> frame = Values(reply, 2);
  const float* values = DecodeFactors(pstrain::FLOAT16, frame.data(), 8, &decoded);
  EXPECT_EQ(std::vector<float>(values, values + 8), left_[1]);
  // A float32 push's relay says no dtype: its replies are what they were.
  Start();
  PushFactors(0, 0, true);
  PushFactors(1, 0, true);
  const Outgoing plain = PullReply(0, 1, {0});
  ASSERT_EQ(plain.header.relay_size(), 2);
  EXPECT_FALSE(plain.header.relay(0).has_dtype());
  EXPECT_EQ(Values(plain, 0), left_[0]);
}

TEST_F(ShardRelayTest, AWorkerThatDidNotRelayMakesTheBroadcastPullAnError) {
  Start();
  PushFactors(0, 0, true);
  PushFactors(1, 0, false);
  const Outgoing reply = PullReply(0, 1, {0});
  EXPECT_EQ(reply.header.type(), pstrain::ERROR);
  EXPECT_EQ(reply.header.text(),
            "no factors of parameter 0 from worker 1 for step 0 (it did not push them with "
            "relay: every worker must broadcast the same weights)");
}

TEST_F(ShardRelayTest, ARelayIsRefusedWhereTheStepIsNotPlainBsp) {
  Start(ConsistencyMode::kSsp);
  const std::vector<Outgoing> out = PushFactors(0, 0, true);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].header.type(), pstrain::ERROR);
  EXPECT_EQ(out[0].header.text(), "factor relay needs plain bsp, this shard runs ssp");
  const Outgoing pull = PullReply(0, 0, {}, {0});
  EXPECT_EQ(pull.header.text(), "factor relay needs plain bsp, this shard runs ssp");
}

TEST_F(ShardRelayTest, APullForIterationZeroHasNoStepToRelay) {
  Start();
  EXPECT_EQ(PullReply(0, 0, {0}).header.text(),
            "a pull for iteration 0 asks for factors (there is no step before it to relay)");
}

}  // namespace
}  // namespace pstrain
