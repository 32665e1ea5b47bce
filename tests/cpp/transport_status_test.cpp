// Transport and peer failures carry the status code that says what they are
// (common/status.hpp), so callers decide by kind: a peer gone or a queue full
// past its deadline is retryable (exit 75, common/exit_code.hpp); a malformed
// message, a bad address or a taken one is not (exit 1).
#include <gtest/gtest.h>

#include "common/exit_code.hpp"
#include "common/transport/address.hpp"
#include "common/transport/channel.hpp"
#include "common/transport/validate.hpp"
#include "tests/cpp/transport_test_util.hpp"

namespace pstrain {
namespace {

using namespace std::chrono_literals;
using testing::MakeHeader;
using transport::OutMessage;
using transport::Payload;

// The code, whether it is retryable, and the exit code, in one line for EXPECT_EQ.
std::string Kind(const Status& s) {
  return std::string(StatusCodeName(s.code())) + (s.IsRetryable() ? " retryable" : " final") +
         " exit " + std::to_string(ExitCodeFor(s));
}

TEST(TransportStatusTest, APeerGoneIsUnavailableAndRetryable) {
  transport::Context ctx;
  auto router = transport::BindRouter(ctx, "inproc://gone");
  ASSERT_TRUE(router.ok());
  Status gone = router.value()->Send("nobody", OutMessage{MakeHeader(HEARTBEAT, 0, 0), {}});
  EXPECT_EQ(Kind(gone), "Unavailable retryable exit 75") << gone.message();
}

TEST(TransportStatusTest, AQueueFullPastTheSendTimeoutIsDeadlineExceededAndRetryable) {
  transport::Context ctx;
  testing::TempFolder folder;
  transport::SocketOptions options;
  options.send_hwm = 1;
  options.send_timeout_ms = 20;
  auto dealer = transport::ConnectDealer(ctx, "ipc://" + folder.path() + "/nobody", options);
  ASSERT_TRUE(dealer.ok()) << dealer.status().message();
  Status status;
  for (int sent = 0; sent < 100 && status.ok(); ++sent) {
    status = dealer.value()->Send("", OutMessage{MakeHeader(HEARTBEAT, 0, 0), {}});
  }
  EXPECT_EQ(Kind(status), "DeadlineExceeded retryable exit 75") << status.message();
}

TEST(TransportStatusTest, AHeaderThatDoesNotParseIsCorruption) {
  transport::Context ctx;
  auto router = transport::BindRouter(ctx, "inproc://garbage");
  auto dealer = transport::ConnectDealer(ctx, "inproc://garbage");
  ASSERT_TRUE(router.ok() && dealer.ok());
  std::vector<transport::Frame> garbage;
  garbage.emplace_back(std::string("\xff\xfe not a header"));
  ASSERT_TRUE(dealer.value()->SendFrames("", std::move(garbage)).ok());
  auto bad = router.value()->Receive(5s);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(Kind(bad.status()), "Corruption final exit 1") << bad.status().message();
}

TEST(TransportStatusTest, MessagesThatBreakTheRulesAreInvalidArgument) {
  transport::Context ctx;
  auto router = transport::BindRouter(ctx, "inproc://rules");
  ASSERT_TRUE(router.ok());
  Status no_peer = router.value()->Send("", OutMessage{MakeHeader(HEARTBEAT, 0, 0), {}});
  EXPECT_EQ(Kind(no_peer), "InvalidArgument final exit 1") << no_peer.message();
  OutMessage mismatch{MakeHeader(PUSH, 0, 0, {{0, 2}, {1, 2}}), {Payload::Of(testing::Ramp(2, 0))}};
  Status lists = router.value()->Send("w", std::move(mismatch));
  EXPECT_EQ(Kind(lists), "InvalidArgument final exit 1") << lists.message();

  transport::InMessage stray;
  stray.header = MakeHeader(HEARTBEAT, 0, 0);
  stray.header.set_job_key(6);
  transport::ValidationRules rules;
  rules.job_key = 5;
  Status refused = transport::Validate(stray, rules);
  EXPECT_EQ(refused.message(), "job key mismatch");
  EXPECT_EQ(Kind(refused), "InvalidArgument final exit 1");
}

TEST(TransportStatusTest, AddressesAndBindsSayWhatFailed) {
  EXPECT_EQ(Kind(transport::MakeAddress("udp", "x", 1).status()), "InvalidArgument final exit 1");
  EXPECT_EQ(Kind(transport::MakeAddress("tcp", "127.0.0.1", 70000).status()),
            "InvalidArgument final exit 1");
  transport::Context ctx;
  auto first = transport::BindRouter(ctx, "inproc://taken");
  ASSERT_TRUE(first.ok());
  auto second = transport::BindRouter(ctx, "inproc://taken");
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().message(), "cannot bind inproc://taken: Address already in use");
  EXPECT_EQ(Kind(second.status()), "IOError final exit 1");
}

}  // namespace
}  // namespace pstrain
