// R pushed once (ps-worker --factor-right holder): Validate's reasons for a
// FACTOR_RIGHT, a push without R and rights_ahead (common/ps/factor_relay.hpp,
// CheckRight); a bsp ShardState sending the R's it holds ahead of the step,
// before the step is complete (what keeps a forward from waiting on the step
// it completes), and its relay then without R; and ForwardedRights pairing a
// push without R with its forwarded R in either order (server/factor_forward.hpp).
#include <gtest/gtest.h>

#include <cstring>
#include <string_view>

#include "common/ps/factor_relay.hpp"
#include "common/transport/validate.hpp"
#include "server/factor_forward.hpp"
#include "tests/cpp/shard_state_test_util.hpp"

namespace pstrain {
namespace {

using server::Outgoing;
using server::test_support::kT0;
using server::test_support::Message;

// As factor_relay_test.cpp: parameter 0 is 4 x 3 on chunks 0 [0,4) and 2
// [8,12) of shard 0 and chunk 1 [4,8) of shard 1; parameter 1 (4 values) on
// shard 1. RelayHolder(0, w): shard 0 for even w, shard 1 for odd.
KeyPlacement TwoShards() { return server::test_support::FactorTwoShards(); }

transport::Frame FrameOf(const std::vector<float>& values) {
  return transport::Frame(std::string_view(reinterpret_cast<const char*>(values.data()),
                                           values.size() * sizeof(float)));
}

class RightValidateTest : public ::testing::Test {
 protected:
  // Worker 1 forwards worker 0's R of parameter 0, step 3 (2 x 3 float32) to
  // shard 1 (worker 0's holder is shard 0).
  void SetUp() override {
    placement_ = TwoShards();
    h_ = pstrain::Header();
    h_.set_type(pstrain::FACTOR_RIGHT);
    h_.set_role(pstrain::WORKER);
    h_.set_sender(1);
    h_.set_clock(3);
    pstrain::FactorRight* r = h_.mutable_right();
    r->set_param(0);
    r->set_worker(0);
    r->set_samples(2);
    r->set_cols(3);
    frames_ = {24};
    shard_ = 1;
    receiver_ = pstrain::SERVER;
  }
  std::string Reason() {
    return server::test_support::FactorTwoShardsReason(h_, frames_, placement_, receiver_, shard_);
  }
  KeyPlacement placement_;
  pstrain::Header h_;
  std::vector<size_t> frames_;
  int shard_ = 1;
  pstrain::Role receiver_ = pstrain::SERVER;
};

TEST_F(RightValidateTest, AcceptsAForwardAndNamesEachFault) {
  EXPECT_EQ(Reason(), "");
  frames_ = {20};
  EXPECT_EQ(Reason(),
            "FACTOR_RIGHT: parameter 0: worker 0's R has 20 bytes, 2 x 3 float32 "
            "need 24");
  frames_ = {24, 24};
  EXPECT_EQ(Reason(), "2 payload frames follow, a FACTOR_RIGHT has 1");
  SetUp();
  h_.mutable_right()->set_dtype(pstrain::FLOAT16);
  EXPECT_EQ(Reason(),
            "FACTOR_RIGHT: parameter 0: worker 0's R has 24 bytes, 2 x 3 FLOAT16 "
            "need 12");
  frames_ = {12};
  EXPECT_EQ(Reason(), "");
  h_.mutable_right()->set_dtype(pstrain::SIGN_SCALED);
  EXPECT_EQ(Reason(),
            "FACTOR_RIGHT: parameter 0: worker 0's R in SIGN_SCALED (it travels as "
            "FLOAT32, FLOAT16 or BFLOAT16)");
  SetUp();
  shard_ = 0;  // worker 0's holder: it has the R from the push
  EXPECT_EQ(Reason(),
            "FACTOR_RIGHT: parameter 0: worker 0's R forwarded to server 0, its "
            "holder (which has it from the push)");
  SetUp();
  h_.mutable_right()->set_worker(2);
  EXPECT_EQ(Reason(), "FACTOR_RIGHT: parameter 0: worker 2 is not in this job (2 workers)");
  SetUp();
  h_.mutable_right()->set_param(1);
  h_.mutable_right()->set_cols(2);
  frames_ = {16};
  shard_ = 0;
  EXPECT_EQ(Reason(), "FACTOR_RIGHT: parameter 1 has no chunk on server 0");
  SetUp();
  h_.mutable_right()->set_cols(5);
  frames_ = {40};
  EXPECT_EQ(Reason(), "FACTOR_RIGHT: parameter 0 has 12 values, not rows of 5");
  SetUp();
  h_.clear_right();
  EXPECT_EQ(Reason(), "FACTOR_RIGHT has no right");
  SetUp();
  h_.set_role(pstrain::CONTROL);
  EXPECT_EQ(Reason(), "a server accepts FACTOR_RIGHT only from a worker");
}

TEST_F(RightValidateTest, TheHolderSendsItsOwnRsAhead) {
  // Server 0 sends worker 0's R to a worker: it is worker 0's holder.
  h_.set_role(pstrain::SERVER);
  h_.set_sender(0);
  receiver_ = pstrain::WORKER;
  shard_ = 0;
  EXPECT_EQ(Reason(), "");
  h_.mutable_right()->set_worker(1);
  EXPECT_EQ(Reason(),
            "FACTOR_RIGHT: parameter 0: worker 1's R comes from server 0 (its holder "
            "is server 1)");
}

TEST_F(RightValidateTest, APushWithoutRHasOneFrameAndNeedsRelay) {
  h_ = pstrain::Header();
  h_.set_type(pstrain::PUSH);
  h_.set_role(pstrain::WORKER);
  h_.set_sender(0);
  h_.set_clock(3);
  pstrain::FactorShape* f = h_.mutable_factors();
  f->set_samples(2);
  f->set_row_begin(1);
  f->set_row_end(3);
  f->set_cols(3);
  f->set_relay(true);
  f->set_right_forwarded(true);
  pstrain::ChunkRef* c = h_.add_chunks();
  c->set_id(1);
  c->set_length(4);
  frames_ = {16};  // L: 2 x 2
  EXPECT_EQ(Reason(), "");
  frames_ = {16, 24};
  EXPECT_EQ(Reason(),
            "factors: 2 payload frames follow, a PUSH with factors and "
            "right_forwarded has 1");
  frames_ = {16};
  f->set_relay(false);
  EXPECT_EQ(Reason(),
            "factors: right_forwarded without relay (R is forwarded under factor "
            "broadcast only)");
  // rights_ahead: PULL and PULL_REPLY only; right: FACTOR_RIGHT only.
  f->set_relay(true);
  h_.add_rights_ahead(0);
  EXPECT_EQ(Reason(), "rights_ahead in a PUSH (only a PULL and a PULL_REPLY carry it)");
  h_.clear_rights_ahead();
  h_.mutable_right()->set_param(0);
  h_.mutable_right()->set_worker(0);
  h_.mutable_right()->set_samples(2);
  h_.mutable_right()->set_cols(3);
  EXPECT_EQ(Reason(), "right in a PUSH (only a FACTOR_RIGHT carries it)");
}

TEST_F(RightValidateTest, ARelayWhoseRsWentAheadCarriesNone) {
  // Shard 0's relay of parameter 0: both workers' L (2 x 4), no R.
  h_ = server::test_support::FactorRelayReply([](uint32_t) { return false; });
  h_.add_rights_ahead(0);
  frames_ = {32, 32};
  receiver_ = pstrain::WORKER;
  shard_ = 0;
  EXPECT_EQ(Reason(), "");
  h_.mutable_relay(0)->set_right(true);
  frames_ = {32, 24, 32};
  EXPECT_EQ(Reason(),
            "relay: parameter 0: worker 0's R is relayed, the reply says it went "
            "ahead (rights_ahead)");
  // Without rights_ahead worker 0's R belongs in shard 0's relay (as before).
  h_.mutable_relay(0)->set_right(false);
  h_.clear_rights_ahead();
  frames_ = {32, 32};
  EXPECT_EQ(Reason(),
            "relay: parameter 0: worker 0's R is missing from server 0 (its holder is "
            "server 0)");
}

// A bsp shard 0 of the 2-shard placement, 2 workers: it holds worker 0's R.
class ShardRightsAheadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server::ShardConfig c = server::test_support::Config(ConsistencyMode::kBsp, 2, 0, 0, 2);
    c.hyper.momentum = 0.f;
    shard_.emplace(std::move(c));
    Message init(pstrain::INIT_PUSH, 0, 0);
    server::test_support::AddFactorNetParams(&init);
    init.Chunk(0, {1, 2, 3, 4});
    init.Chunk(2, {9, 10, 11, 12});
    Send(init);
  }
  std::vector<Outgoing> Send(Message& m, const float* left = nullptr,
                             const float* right = nullptr) {
    server::Incoming in = m.get();
    in.factor_left = left;
    in.factor_right = right;
    return shard_->Handle(in, kT0);
  }
  // Worker w's complete relay push of step t (2 samples, L over rows 0-3).
  std::vector<Outgoing> Push(int w, int64_t t) {
    left_[w] = {1.f + w, 2, 3, 4, 5, 6, 7, 8};
    right_[w] = {0.5f, 1, 1.5f + w, 2, 2.5f, 3.f + t};
    Message push(pstrain::PUSH, w, t);
    pstrain::FactorShape* f = push.header().mutable_factors();
    f->set_samples(2);
    f->set_row_begin(0);
    f->set_row_end(4);
    f->set_cols(3);
    f->set_relay(true);
    push.Chunk(0, {0.01f, 0.02f, 0.03f, 0.04f});
    push.Chunk(2, {0.05f, 0.06f, 0.07f, 0.08f});
    return Send(push, left_[w].data(), right_[w].data());
  }
  std::optional<server::ShardState> shard_;
  std::vector<float> left_[2], right_[2];
};

TEST_F(ShardRightsAheadTest, TheHeldRsGoAheadOfTheStepAndTheRelayCarriesNone) {
  Push(0, 0);
  Push(1, 0);
  // Step 1: worker 1 asks for the R's of step 1 ahead, before any push of it.
  Message pull(pstrain::PULL, 1, 2);
  pull.header().add_broadcast(0);
  pull.header().add_rights_ahead(0);
  EXPECT_TRUE(Send(pull).empty());  // nothing of step 1 is in
  // Worker 0's push of step 1 is in: its R goes to worker 1 at once, while the
  // step still waits for worker 1's push (version 1).
  std::vector<Outgoing> out = Push(0, 1);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].header.type(), pstrain::PUSH_ACK);
  const Outgoing& ahead = out[0];
  ASSERT_EQ(ahead.header.type(), pstrain::FACTOR_RIGHT);
  EXPECT_EQ(shard_->version(), 1);
  EXPECT_EQ(ahead.peer, "w1");
  EXPECT_EQ(ahead.header.clock(), 1);
  EXPECT_EQ(ahead.header.right().param(), 0u);
  EXPECT_EQ(ahead.header.right().worker(), 0u);
  EXPECT_EQ(ahead.header.right().samples(), 2u);
  EXPECT_EQ(ahead.header.right().cols(), 3u);
  ASSERT_EQ(ahead.payloads.size(), 1u);
  EXPECT_EQ(*ahead.payloads[0], right_[0]);
  // Worker 1's push completes step 1: the relay answers with both L's, no R.
  out = Push(1, 1);
  EXPECT_EQ(shard_->version(), 2);
  ASSERT_EQ(out.size(), 2u);
  const Outgoing& reply = out[1];
  ASSERT_EQ(reply.header.type(), pstrain::PULL_REPLY) << reply.header.text();
  EXPECT_EQ(
      std::vector<uint32_t>(reply.header.rights_ahead().begin(), reply.header.rights_ahead().end()),
      (std::vector<uint32_t>{0}));
  ASSERT_EQ(reply.header.relay_size(), 2);
  EXPECT_FALSE(reply.header.relay(0).right());
  EXPECT_FALSE(reply.header.relay(1).right());
  ASSERT_EQ(reply.payloads.size(), 2u);
  EXPECT_EQ(*reply.payloads[0], left_[0]);
  EXPECT_EQ(*reply.payloads[1], left_[1]);
}

TEST_F(ShardRightsAheadTest, RsAlreadyKeptGoWithThePullAndOnlyOnce) {
  Push(0, 0);
  Message pull(pstrain::PULL, 0, 1);
  pull.header().add_history_params(0);  // a pull of weights (a restart) forwards too
  pull.header().add_rights_ahead(0);
  std::vector<Outgoing> out = Send(pull);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].header.type(), pstrain::FACTOR_RIGHT);
  EXPECT_EQ(out[0].peer, "w0");
  out = Push(1, 0);  // the step lands: the pull's weights go, the R does not again
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].header.type(), pstrain::PULL_REPLY);
}

class ForwardedRightsTest : public ::testing::Test {
 protected:
  // A message of `type` from worker `sender` (peer "w<sender>") at `clock`.
  static transport::InMessage FromWorker(pstrain::MessageType type, int sender, int64_t clock) {
    transport::InMessage m;
    m.peer = "w" + std::to_string(sender);
    m.header.set_type(type);
    m.header.set_role(pstrain::WORKER);
    m.header.set_sender(sender);
    m.header.set_clock(clock);
    return m;
  }
  // Worker 1's push of parameter 0 to shard 1 without R: chunk 1, L 2 x 2.
  transport::InMessage LeftOnly(int64_t clock) {
    transport::InMessage m = FromWorker(pstrain::PUSH, 1, clock);
    pstrain::FactorShape* f = m.header.mutable_factors();
    f->set_samples(2);
    f->set_row_begin(1);
    f->set_row_end(3);
    f->set_cols(3);
    f->set_relay(true);
    f->set_right_forwarded(true);
    pstrain::ChunkRef* c = m.header.add_chunks();
    c->set_id(1);
    c->set_length(4);
    m.frames.push_back(FrameOf({1, 2, 3, 4}));
    m.AlignPayloads();
    return m;
  }
  // Worker 0 forwards worker 1's R of that step.
  transport::InMessage Right(int64_t clock, float first) {
    transport::InMessage m = FromWorker(pstrain::FACTOR_RIGHT, 0, clock);
    pstrain::FactorRight* r = m.header.mutable_right();
    r->set_param(0);
    r->set_worker(1);
    r->set_samples(2);
    r->set_cols(3);
    m.frames.push_back(FrameOf({first, 6, 7, 8, 9, 10}));
    m.AlignPayloads();
    return m;
  }
  static std::vector<float> Frame(const transport::InMessage& m, size_t i) {
    return std::vector<float>(m.payload(i), m.payload(i) + m.payload_length(i));
  }
  KeyPlacement placement_ = TwoShards();
  server::ForwardedRights rights_;
};

TEST_F(ForwardedRightsTest, APushWaitsForItsRAndAnRWaitsForItsPush) {
  EXPECT_FALSE(rights_.OnLeft(LeftOnly(4), placement_, 2).has_value());
  EXPECT_EQ(rights_.waiting(), 1u);
  EXPECT_FALSE(rights_.OnRight(Right(3, 5), placement_, 2).has_value());  // another step
  std::optional<transport::InMessage> done = rights_.OnRight(Right(4, 5), placement_, 2);
  ASSERT_TRUE(done.has_value());
  EXPECT_EQ(rights_.waiting(), 0u);
  EXPECT_EQ(done->peer, "w1");  // the pusher's: its ERROR, if any, goes there
  EXPECT_EQ(done->header.sender(), 1);
  ASSERT_EQ(done->payload_count(), 2u);
  EXPECT_EQ(Frame(*done, 0), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(Frame(*done, 1), (std::vector<float>{5, 6, 7, 8, 9, 10}));
  // The R stays for the step's pushes (a restarted worker pushes it again).
  done = rights_.OnLeft(LeftOnly(4), placement_, 2);
  ASSERT_TRUE(done.has_value());
  EXPECT_EQ(Frame(*done, 1), (std::vector<float>{5, 6, 7, 8, 9, 10}));
  // Step 3's R came after step 4's: the older one does not replace it.
  EXPECT_FALSE(rights_.OnRight(Right(2, 1), placement_, 2).has_value());
  done = rights_.OnLeft(LeftOnly(4), placement_, 2);
  ASSERT_TRUE(done.has_value());
  EXPECT_EQ(Frame(*done, 1)[0], 5.f);
  // Step 5: the push first, then its R.
  EXPECT_FALSE(rights_.OnLeft(LeftOnly(5), placement_, 2).has_value());
  done = rights_.OnRight(Right(5, 11), placement_, 2);
  ASSERT_TRUE(done.has_value());
  EXPECT_EQ(done->header.clock(), 5);
  EXPECT_EQ(Frame(*done, 1)[0], 11.f);
}

// ReceiveForwarding, as ShardLoop hands it a push without R and a FACTOR_RIGHT:
// acknowledged at once, then taken whole; outside plain bsp refused.
class ReceiveForwardingTest : public ForwardedRightsTest {
 protected:
  // Shard 1 of the 2-shard placement, 2 workers, initialised.
  void Start(ConsistencyMode mode) {
    server::ShardConfig c = server::test_support::Config(mode, 2, 0, 1, 2);
    c.hyper.momentum = 0.f;
    shard_.emplace(std::move(c));
    Message init(pstrain::INIT_PUSH, 0, 0);
    server::test_support::AddFactorNetParams(&init);
    init.Chunk(1, {5, 6, 7, 8});
    init.Chunk(3, {1, 1, 1, 1});
    shard_->Handle(init.get(), kT0);
  }
  std::vector<Outgoing> Receive(transport::InMessage m) {
    dropped_.clear();
    return server::ReceiveForwarding(std::move(m), *shard_, rights_, factors_, kT0, &dropped_);
  }
  std::optional<server::ShardState> shard_;
  server::FactorArrival factors_;
  std::string dropped_;
};

TEST_F(ReceiveForwardingTest, APushWithoutRIsAcknowledgedThenTakenWithItsR) {
  Start(ConsistencyMode::kBsp);
  std::vector<Outgoing> out = Receive(LeftOnly(0));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].header.type(), pstrain::PUSH_ACK);
  EXPECT_EQ(out[0].peer, "w1");
  out = Receive(Right(0, 5));
  EXPECT_TRUE(out.empty());  // taken (no second PUSH_ACK); the step waits for worker 0
  // The init push's 2 chunks (32 bytes), then the L frame alone (16), not the R (24).
  EXPECT_EQ(shard_->Stats().bytes_received(), 32 + 16);
  EXPECT_EQ(shard_->clocks().clock(1), 0);  // chunk 3 still to come from worker 1
}

TEST_F(ReceiveForwardingTest, OutsidePlainBspThePushIsRefusedAndTheRDropped) {
  Start(ConsistencyMode::kSsp);
  std::vector<Outgoing> out = Receive(LeftOnly(0));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].header.type(), pstrain::ERROR);
  EXPECT_EQ(out[0].header.text(), "factor relay needs plain bsp, this shard runs ssp");
  EXPECT_TRUE(Receive(Right(0, 5)).empty());
  EXPECT_EQ(dropped_, "factor relay needs plain bsp, this shard runs ssp");
  EXPECT_EQ(shard_->Stats().bad_messages(), 2);
}

}  // namespace
}  // namespace pstrain
