// Tests of the fault-injecting channel: drops, duplicates, delays and
// corruptions happen as specified, deterministically for a seed, and never
// write into the sender's memory.
#include <gtest/gtest.h>

#include <cstring>
#include <set>

#include "common/transport/fault.hpp"
#include "common/transport/validate.hpp"
#include "tests/cpp/transport_test_util.hpp"

namespace pstrain {
namespace {

using namespace std::chrono_literals;
using testing::MakeHeader;
using testing::MustReceive;
using testing::NothingArrives;
using testing::Ramp;
using transport::Channel;
using transport::FaultChannel;
using transport::FaultSpec;
using transport::InMessage;
using transport::OutMessage;
using transport::Payload;

class FaultTest : public ::testing::Test {
 protected:
  // A ROUTER on inproc://<name> and a DEALER to it wrapped with `faults`.
  void Connect(const std::string& name, const FaultSpec& faults) {
    auto router = transport::BindRouter(ctx_, "inproc://" + name);
    auto dealer = transport::ConnectDealer(ctx_, "inproc://" + name);
    ASSERT_TRUE(router.ok() && dealer.ok());
    router_ = std::move(router.value());
    faulty_ = std::make_unique<FaultChannel>(std::move(dealer.value()), faults);
  }
  // PUSH at `clock` with two payloads of 64 and 16 values.
  OutMessage Push(int64_t clock) {
    OutMessage out{MakeHeader(PUSH, 0, clock, {{0, 64}, {1, 16}}), {}};
    out.payloads = {Payload::Of(values_), Payload::Slice(values_, 10, 16)};
    return out;
  }
  // Clocks of the messages that arrive within `wait` of each other.
  std::vector<int64_t> ReceivedClocks(std::chrono::milliseconds wait = 100ms) {
    std::vector<int64_t> clocks;
    while (true) {
      auto in = router_->Receive(wait);
      if (!in.ok() || !in.value().has_value()) break;
      clocks.push_back(in.value()->header.clock());
    }
    return clocks;
  }

  transport::Context ctx_;
  std::shared_ptr<const std::vector<float>> values_ = Ramp(64, 1.0f);
  std::unique_ptr<Channel> router_;
  std::unique_ptr<FaultChannel> faulty_;
};

TEST_F(FaultTest, NoFaultsPassesEverythingThrough) {
  Connect("clean", FaultSpec{});
  for (int k = 0; k < 5; ++k) ASSERT_TRUE(faulty_->Send("", Push(k)).ok());
  EXPECT_EQ(ReceivedClocks(), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(faulty_->counts().messages, 5);
  EXPECT_EQ(faulty_->counts().dropped + faulty_->counts().duplicated, 0);
}

TEST_F(FaultTest, DropAllAndDuplicateAll) {
  Connect("drop", FaultSpec{.drop = 1});
  for (int k = 0; k < 5; ++k) ASSERT_TRUE(faulty_->Send("", Push(k)).ok());
  EXPECT_TRUE(NothingArrives(*router_, 50ms));
  EXPECT_EQ(faulty_->counts().dropped, 5);

  Connect("dup", FaultSpec{.duplicate = 1});
  for (int k = 0; k < 3; ++k) ASSERT_TRUE(faulty_->Send("", Push(k)).ok());
  EXPECT_EQ(ReceivedClocks(), (std::vector<int64_t>{0, 0, 1, 1, 2, 2}));
  EXPECT_EQ(faulty_->counts().duplicated, 3);
}

TEST_F(FaultTest, HalfDroppedSameSeedSameMessages) {
  std::vector<int64_t> runs[3];
  const uint64_t seeds[3] = {7, 7, 8};
  for (int r = 0; r < 3; ++r) {
    Connect("half" + std::to_string(r), FaultSpec{.drop = 0.5, .seed = seeds[r]});
    for (int k = 0; k < 200; ++k) ASSERT_TRUE(faulty_->Send("", Push(k)).ok());
    runs[r] = ReceivedClocks(50ms);
    EXPECT_EQ(static_cast<int64_t>(runs[r].size()), 200 - faulty_->counts().dropped);
    EXPECT_GT(runs[r].size(), 60u);
    EXPECT_LT(runs[r].size(), 140u);
  }
  EXPECT_EQ(runs[0], runs[1]);
  EXPECT_NE(runs[0], runs[2]);
}

TEST_F(FaultTest, CorruptHeaderNeverArrivesIntact) {
  Connect("header", FaultSpec{.corrupt_header = 1, .seed = 3});
  int errors = 0, altered = 0;
  for (int k = 0; k < 50; ++k) {
    OutMessage out = Push(k);
    const std::string sent = out.header.SerializeAsString();
    ASSERT_TRUE(faulty_->Send("", std::move(out)).ok());
    auto in = router_->Receive(5s);
    if (!in.ok()) {
      EXPECT_NE(in.status().message().find("header does not parse"), std::string::npos);
      ++errors;
      continue;
    }
    ASSERT_TRUE(in.value().has_value());
    EXPECT_NE(in.value()->header.SerializeAsString(), sent);
    ++altered;
  }
  EXPECT_EQ(errors + altered, 50);
  EXPECT_GT(errors, 0);  // both outcomes occur over 50 messages
  EXPECT_EQ(faulty_->counts().header_corrupted, 50);
}

TEST_F(FaultTest, CorruptPayloadFlipsOneByteOfACopy) {
  Connect("payload", FaultSpec{.corrupt_payload = 1, .seed = 5});
  const std::vector<float> original = *values_;
  for (int k = 0; k < 20; ++k) {
    ASSERT_TRUE(faulty_->Send("", Push(k)).ok());
    InMessage in = MustReceive(*router_);
    ASSERT_TRUE(transport::Validate(in, {}).ok());  // sizes intact: only the values differ
    int differing = 0;
    const auto* got0 = reinterpret_cast<const unsigned char*>(in.payload(0));
    const auto* got1 = reinterpret_cast<const unsigned char*>(in.payload(1));
    const auto* want = reinterpret_cast<const unsigned char*>(original.data());
    for (size_t b = 0; b < 64 * sizeof(float); ++b) differing += got0[b] != want[b];
    for (size_t b = 0; b < 16 * sizeof(float); ++b) differing += got1[b] != want[40 + b];
    EXPECT_EQ(differing, 1);
  }
  EXPECT_EQ(*values_, original);  // the sender's memory is untouched
}

TEST_F(FaultTest, TruncatedPayloadFailsValidation) {
  Connect("truncate", FaultSpec{.truncate_payload = 1, .seed = 11});
  for (int k = 0; k < 20; ++k) {
    ASSERT_TRUE(faulty_->Send("", Push(k)).ok());
    InMessage in = MustReceive(*router_);
    ASSERT_EQ(in.payload_count(), 2u);
    const bool first_cut = in.payload_bytes(0) < 64 * sizeof(float);
    EXPECT_NE(first_cut, in.payload_bytes(1) < 16 * sizeof(float));  // exactly one is cut
    Status status = transport::Validate(in, {});
    const std::string chunk = first_cut ? "chunk 0" : "chunk 1";
    const size_t needed = first_cut ? 256 : 64;
    EXPECT_EQ(status.message(), chunk + ": payload has " +
                                    std::to_string(in.payload_bytes(first_cut ? 0 : 1)) +
                                    " bytes, the chunk needs " + std::to_string(needed));
  }
}

TEST_F(FaultTest, DelayHoldsEachSend) {
  Connect("delay", FaultSpec{.delay_ms = 30});
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(faulty_->Send("", Push(0)).ok());
  ASSERT_TRUE(faulty_->Send("", Push(1)).ok());
  EXPECT_GE(std::chrono::steady_clock::now() - start, 60ms);
  EXPECT_EQ(ReceivedClocks(), (std::vector<int64_t>{0, 1}));
}

TEST_F(FaultTest, WithFaultsKeepsTheEndpoint) {
  auto dealer = transport::ConnectDealer(ctx_, "inproc://wrapped");
  ASSERT_TRUE(dealer.ok());
  auto wrapped = transport::WithFaults(std::move(dealer.value()), FaultSpec{});
  EXPECT_EQ(wrapped->endpoint(), "inproc://wrapped");
}

}  // namespace
}  // namespace pstrain
