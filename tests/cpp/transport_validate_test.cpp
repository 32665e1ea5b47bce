// Tests of Validate (each malformed kind gives its exact reason, a good
// message passes), the protocol's kinds table and builders, and PeerLiveness.
#include <gtest/gtest.h>

#include <cstring>

#include "common/transport/liveness.hpp"
#include "common/transport/protocol.hpp"
#include "common/transport/validate.hpp"
#include "tests/cpp/transport_test_util.hpp"

namespace pstrain {
namespace {

using namespace std::chrono_literals;
using testing::MakeHeader;
using transport::InMessage;
using transport::Validate;
using transport::ValidationRules;

// Parameters of 10 and 7 values, 4 values a chunk: chunks 0 (4), 1 (4), 2 (2)
// of param 0 and 3 (4), 4 (3) of param 1, on 2 shards.
class MessageValidateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto placement = KeyPlacement::Create({10, 7}, 2, 16);
    ASSERT_TRUE(placement.ok());
    placement_ = std::move(placement.value());
    // Greedy by size: 0 -> shard 0, 1 -> 1, 3 -> 0, 4 -> 1, 2 -> 1.
    ASSERT_EQ(placement_.shard_chunks(0), (std::vector<uint32_t>{0, 3}));
    ASSERT_EQ(placement_.shard_chunks(1), (std::vector<uint32_t>{1, 2, 4}));
    rules_.job_key = 42;
    rules_.num_workers = 2;
    rules_.num_servers = 2;
    rules_.placement = &placement_;
    rules_.shard = 0;
    rules_.min_clock = 3;
    rules_.max_clock = 12;
  }

  // A PUSH from worker 1 at clock 5 with the given (id, length) chunks and
  // payload frames of the given byte sizes.
  static InMessage Push(const std::vector<std::pair<uint32_t, uint64_t>>& chunks,
                        const std::vector<size_t>& frame_bytes) {
    InMessage in;
    in.header = MakeHeader(PUSH, 1, 5, chunks);
    in.header.set_job_key(42);
    for (size_t bytes : frame_bytes) in.frames.emplace_back(bytes);
    in.AlignPayloads();
    return in;
  }
  static InMessage Good() { return Push({{3, 4}, {0, 4}}, {16, 16}); }

  std::string Reason(const InMessage& in) { return Validate(in, rules_).message(); }

  KeyPlacement placement_;
  ValidationRules rules_;
};

TEST_F(MessageValidateTest, AcceptsAGoodMessage) {
  EXPECT_TRUE(Validate(Good(), rules_).ok());
  InMessage pull;
  pull.header = MakeHeader(PULL, 0, 3);
  pull.header.set_job_key(42);
  EXPECT_TRUE(Validate(pull, rules_).ok());
  InMessage heartbeat;
  heartbeat.header = MakeHeader(HEARTBEAT, 1, 0);  // no clock range outside PUSH / PULL
  heartbeat.header.set_job_key(42);
  EXPECT_TRUE(Validate(heartbeat, rules_).ok());
  // Nothing set: everything but the frames is unchecked.
  InMessage stray = Push({{99, 2}}, {8});
  stray.header.set_sender(1000);
  EXPECT_TRUE(Validate(stray, ValidationRules{}).ok());
}

TEST_F(MessageValidateTest, RejectsEachMalformedKindWithItsReason) {
  InMessage in = Good();
  in.header.set_job_key(7);
  EXPECT_EQ(Reason(in), "job key mismatch");

  in = Good();
  in.header.set_sender(5);
  EXPECT_EQ(Reason(in), "worker 5 is not in this job (2 workers)");
  in.header.set_sender(-1);
  EXPECT_EQ(Reason(in), "worker -1 is not in this job (2 workers)");
  in.header.set_role(SERVER);
  in.header.set_sender(3);
  EXPECT_EQ(Reason(in), "server 3 is not in this job (2 servers)");

  InMessage hello;
  hello.header = MakeHeader(HELLO, 0, 0);
  hello.header.set_job_key(42);
  hello.header.set_world_size(3);
  EXPECT_EQ(Reason(hello), "world size 3 does not match this job (2 workers)");

  EXPECT_EQ(Reason(Push({{3, 4}, {0, 4}, {0, 4}}, {16, 16})),
            "header lists 3 chunks but 2 payload frames follow");
  EXPECT_EQ(Reason(Push({{17, 4}}, {16})), "chunk 17 does not exist (5 chunks)");
  EXPECT_EQ(Reason(Push({{3, 4}, {1, 4}}, {16, 16})), "chunk 1 is held by shard 1, not shard 0");
  EXPECT_EQ(Reason(Push({{3, 4}, {3, 4}}, {16, 16})), "chunk 3 appears twice");
  EXPECT_EQ(Reason(Push({{3, 100}}, {400})), "chunk 3: header says 100 values, the chunk has 4");
  EXPECT_EQ(Reason(Push({{3, 4}}, {15})), "chunk 3: payload has 15 bytes, the chunk needs 16");
  EXPECT_EQ(Reason(Push({{0, 4}}, {20})), "chunk 0: payload has 20 bytes, the chunk needs 16");

  in = Good();
  in.header.set_clock(900);
  EXPECT_EQ(Reason(in), "clock 900 is outside [3, 12]");
  in.header.set_clock(2);
  EXPECT_EQ(Reason(in), "clock 2 is outside [3, 12]");
  in.header.clear_clock();
  EXPECT_EQ(Reason(in), "PUSH has no clock");
}

TEST_F(MessageValidateTest, WithoutPlacementTheHeaderLengthsRule) {
  ValidationRules rules;
  EXPECT_EQ(Validate(Push({{8, 3}}, {8}), rules).message(),
            "chunk 8: payload has 8 bytes, the chunk needs 12");
  EXPECT_EQ(Validate(Push({{8, 2}, {8, 2}}, {8, 8}), rules).message(), "chunk 8 appears twice");
}

TEST_F(MessageValidateTest, UnknownDtypeIsRejected) {
  // dtype = 9 on the wire: proto2 parks the unknown enum value among the
  // unknown fields, so only the raw bytes can carry it.
  Header h = Good().header;
  std::string bytes = h.SerializeAsString();
  bytes += std::string("\x38\x09", 2);  // field 7, varint 9 (no such DataType)
  InMessage in = Good();
  ASSERT_TRUE(in.header.ParseFromString(bytes));
  EXPECT_EQ(in.header.dtype(), FLOAT32);  // what the accessor says
  EXPECT_EQ(Reason(in), "unsupported dtype");
}

TEST_F(MessageValidateTest, CompressedPushesAreCheckedAndOnlyPushesMayBeCompressed) {
  // Chunks of 4 values: FLOAT16 needs 8 bytes each, SIGN_SCALED 8 (scale + 1 word).
  InMessage half = Push({{3, 4}, {0, 4}}, {8, 8});
  half.header.set_dtype(FLOAT16);
  EXPECT_TRUE(Validate(half, rules_).ok());
  InMessage wrong = Good();  // 16 bytes a chunk
  wrong.header.set_dtype(FLOAT16);
  EXPECT_EQ(Reason(wrong), "chunk 3: FLOAT16 payload has 16 bytes, 4 values need 8");
  InMessage sign = Push({{3, 4}}, {8});
  sign.header.set_dtype(SIGN_SCALED);
  const float bad_scale = -1.f;
  std::memcpy(sign.frames[0].data(), &bad_scale, 4);
  sign.AlignPayloads();
  EXPECT_NE(Reason(sign).find("chunk 3: SIGN_SCALED scale"), std::string::npos);
  InMessage topk = Push({{3, 4}}, {12});  // k = 1: index 4 is out of range
  topk.header.set_dtype(TOP_K);
  const uint32_t words[] = {1, 4, 0};
  std::memcpy(topk.frames[0].data(), words, 12);
  topk.AlignPayloads();
  EXPECT_EQ(Reason(topk), "chunk 3: TOP_K index 4 >= 4");
  InMessage pull;
  pull.header = MakeHeader(PULL, 0, 3);
  pull.header.set_job_key(42);
  pull.header.set_dtype(FLOAT16);
  EXPECT_EQ(Reason(pull),
            "dtype FLOAT16 in a PULL (only a PUSH may be compressed, and a PULL_REPLY be FLOAT16 "
            "or BFLOAT16)");
}

TEST_F(MessageValidateTest, AlignedCopiesOnlyWhereNeeded) {
  InMessage in = Push({{3, 4}, {0, 4}}, {16, 16});
  // Frames of up to 33 bytes live inside the Frame itself: always copied.
  ASSERT_EQ(in.aligned.size(), 2u);
  EXPECT_EQ(in.aligned[0].size(), 4u);
  InMessage big;
  big.frames.emplace_back(4096);
  std::memset(big.frames[0].data(), 0, 4096);
  big.AlignPayloads();
  EXPECT_TRUE(big.aligned.empty());  // malloc'ed by ZeroMQ: read in place
  EXPECT_EQ(big.payload(0), static_cast<const float*>(big.frames[0].data()));
}

TEST_F(MessageValidateTest, KindsAreCheckedForTheReceiversRole) {
  rules_.receiver = SERVER;
  EXPECT_TRUE(Validate(Good(), rules_).ok());
  InMessage reply;
  reply.header = MakeHeader(PULL_REPLY, 0, 3);
  reply.header.set_job_key(42);
  EXPECT_EQ(Reason(reply), "a server does not accept PULL_REPLY");
  InMessage push = Good();
  push.header.set_role(SERVER);
  push.header.set_sender(0);
  EXPECT_EQ(Reason(push), "a server accepts PUSH only from a worker");
  InMessage stats;
  stats.header = MakeHeader(STATS, 0, 0);
  stats.header.set_role(CONTROL);
  stats.header.set_job_key(42);
  EXPECT_TRUE(Validate(stats, rules_).ok());  // ps-train asks for STATS too
  stats.header.set_type(HEARTBEAT);
  EXPECT_EQ(Reason(stats), "a server accepts HEARTBEAT only from a worker");
  InMessage hello;
  hello.header = MakeHeader(HELLO, 0, 0);
  hello.header.set_job_key(42);
  EXPECT_EQ(Reason(hello), "HELLO has no world_size");
  InMessage norm;
  norm.header = MakeHeader(NORM_TOTAL, 0, 4);
  norm.header.set_role(SERVER);
  norm.header.set_job_key(42);
  EXPECT_EQ(Reason(norm), "NORM_TOTAL has no sum_squares");

  rules_.receiver = WORKER;
  EXPECT_EQ(Reason(Good()), "a worker does not accept PUSH");
  reply.header.set_role(SERVER);
  EXPECT_EQ(Reason(reply), "PULL_REPLY has no version");
  reply.header.set_version(2);
  EXPECT_EQ(Reason(reply), "PULL_REPLY has no reply_chunks_total");
  reply.header.set_reply_chunks_total(3);
  EXPECT_EQ(Reason(reply), "PULL_REPLY says 3 chunks in all, shard 0 holds 2");
  reply.header.set_reply_chunks_total(2);
  EXPECT_TRUE(Validate(reply, rules_).ok());
}

TEST_F(MessageValidateTest, AChunkListCanBeCheckedForCompleteness) {
  Header h = Good().header;  // chunks 3 and 0: all of shard 0
  EXPECT_TRUE(transport::CheckChunkList(h, placement_, 0, /*complete=*/true).ok());
  h.mutable_chunks()->RemoveLast();
  EXPECT_EQ(transport::CheckChunkList(h, placement_, 0, true).message(),
            "it carries 1 of shard 0's 2 chunks");
  EXPECT_TRUE(transport::CheckChunkList(h, placement_, 0, false).ok());
  EXPECT_EQ(transport::CheckChunkList(h, placement_, 1, false).message(),
            "chunk 3 is held by shard 0, not shard 1");
}

TEST(ProtocolTest, BuildersAndHelloAck) {
  const transport::Origin worker{WORKER, 3, 9};
  Header push = transport::PushHeader(worker, 7, -1);
  EXPECT_EQ(push.type(), PUSH);
  EXPECT_EQ(push.role(), WORKER);
  EXPECT_EQ(push.sender(), 3);
  EXPECT_EQ(push.job_key(), 9u);
  EXPECT_EQ(push.clock(), 7);
  EXPECT_FALSE(push.has_sum_squares());
  EXPECT_EQ(transport::PushHeader(worker, 7, 2.5).sum_squares(), 2.5);
  EXPECT_FALSE(transport::NewHeader({WORKER, 0, 0}, STATS).has_job_key());
  const transport::Origin server{SERVER, 1, 9};
  Header ack = transport::HelloAckHeader(server, transport::HelloHeader(worker, 4), 12, 11,
                                         ConsistencyMode::kSsp, 4);
  EXPECT_TRUE(transport::CheckKind(ack, WORKER).ok());
  auto read = transport::ReadHelloAck(ack);
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(read->clock, 12);
  EXPECT_EQ(read->version, 11);
  EXPECT_EQ(read->mode, ConsistencyMode::kSsp);
  ack.set_text("sync");
  EXPECT_EQ(transport::ReadHelloAck(ack).status().message(),
            "HELLO_ACK: mode \"sync\" is not one of bsp, ssp, asp");
  Header error = transport::ErrorHeader(server, push, "no");
  EXPECT_EQ(error.type(), ERROR);
  EXPECT_EQ(error.clock(), 7);  // names the request's iteration
  EXPECT_EQ(error.text(), "no");
}

TEST(PeerLivenessTest, ReportsSilentPeersInNameOrder) {
  transport::PeerLiveness live;
  const auto t0 = std::chrono::steady_clock::time_point{} + 1h;
  live.Heard("w1", t0);
  live.Heard("w0", t0);
  live.Heard("w2", t0 + 5s);
  EXPECT_TRUE(live.Silent(t0 + 4s, 4s).empty());  // exactly the timeout: not yet silent
  EXPECT_EQ(live.Silent(t0 + 8s, 4s), (std::vector<std::string>{"w0", "w1"}));
  live.Heard("w1", t0 + 7s);
  live.Heard("w1", t0 + 1s);  // an older time never moves it back
  EXPECT_EQ(live.last_heard("w1"), t0 + 7s);
  EXPECT_EQ(live.Silent(t0 + 8s, 4s), (std::vector<std::string>{"w0"}));
  live.Forget("w0");
  EXPECT_FALSE(live.Knows("w0"));
  EXPECT_TRUE(live.Silent(t0 + 8s, 4s).empty());
  EXPECT_EQ(live.size(), 2u);
  EXPECT_EQ(live.Silent(t0 + 20s, 4s), (std::vector<std::string>{"w1", "w2"}));
}

}  // namespace
}  // namespace pstrain
