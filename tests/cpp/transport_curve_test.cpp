// CURVE on real ZeroMQ sockets over 127.0.0.1: key files, the ZAP handler
// admitting only a keys folder's public keys, the peer name every message
// carries, and Validate binding a key to its rank and control messages to the
// orchestrator's key.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <fstream>

#include "common/transport/curve.hpp"
#include "common/transport/validate.hpp"
#include "tests/cpp/transport_test_util.hpp"

namespace pstrain::transport {
namespace {

using pstrain::testing::MakeHeader;
using pstrain::testing::MustReceive;
using pstrain::testing::NothingArrives;
using pstrain::testing::TempFolder;
using std::chrono::milliseconds;

class CurveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    keys_ = folder_.path() + "/keys";
    ASSERT_TRUE(WriteKeyFolder(keys_, 1, 2).ok());
  }
  KeyPair Pair(const std::string& name) {
    auto pair = ReadKeyPair(keys_, name);
    EXPECT_TRUE(pair.ok()) << pair.status().message();
    return pair.ok() ? pair.value() : KeyPair{};
  }
  // A CURVE server ROUTER admitting the folder's keys, on a free port.
  std::unique_ptr<Channel> Server(Context& context) {
    auto admitted = ReadAdmittedKeys(keys_);
    EXPECT_TRUE(admitted.ok()) << admitted.status().message();
    EXPECT_EQ(admitted.value().size(), 4u);  // control, server-0, worker-0, worker-1
    EXPECT_TRUE(context.AdmitKeys(admitted.value()).ok());
    SocketOptions options;
    options.curve_secret_key = Pair("server-0").secret_key;
    auto router = BindRouter(context, "tcp://127.0.0.1:*", options);
    EXPECT_TRUE(router.ok()) << router.status().message();
    return std::move(router).value();
  }
  std::unique_ptr<Channel> Client(Context& context, const std::string& endpoint, const KeyPair& own,
                                  int send_timeout_ms = 10000) {
    SocketOptions options;
    options.send_timeout_ms = send_timeout_ms;
    options.curve_server_key = Pair("server-0").public_key;
    options.curve_public_key = own.public_key;
    options.curve_secret_key = own.secret_key;
    auto dealer = ConnectDealer(context, endpoint, options);
    EXPECT_TRUE(dealer.ok()) << dealer.status().message();
    return std::move(dealer).value();
  }

  TempFolder folder_;
  std::string keys_;
};

TEST_F(CurveTest, KeyFilesAreOwnerOnlyAndAWiderSecretIsRefused) {
  struct stat info {};
  ASSERT_EQ(stat(keys_.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0700u);
  ASSERT_EQ(stat((keys_ + "/worker-1.key").c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u);
  KeyPair pair = Pair("worker-1");
  EXPECT_EQ(pair.public_key.size(), 40u);
  EXPECT_NE(pair.public_key, Pair("worker-0").public_key);
  ASSERT_EQ(chmod((keys_ + "/worker-1.key").c_str(), 0644), 0);
  auto refused = ReadKeyPair(keys_, "worker-1");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message(),
            keys_ + "/worker-1.key: is readable by others (mode 0644); it must be 0600");
  std::ofstream(keys_ + "/worker-0.pub") << "not a key\n";
  auto bad = ReadPublicKey(keys_, "worker-0");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), keys_ + "/worker-0.pub: not a CURVE key (40 Z85 characters)");
  EXPECT_FALSE(WriteKeyFolder(keys_, 1, 1).ok());  // never over an existing folder
}

TEST_F(CurveTest, AdmittedKeysArriveNamedAndStrangersNever) {
  Context server_context, client_context;
  auto router = Server(server_context);
  auto worker1 = Client(client_context, router->endpoint(), Pair("worker-1"));
  ASSERT_TRUE(worker1->Send("", {MakeHeader(pstrain::HELLO, 1, 0), {}}).ok());
  InMessage hello = MustReceive(*router);
  EXPECT_EQ(hello.user_id, "worker 1");
  EXPECT_NE(Describe(hello).find("(key of worker 1)"), std::string::npos) << Describe(hello);

  // An unknown key and a peer without CURVE: refused at the handshake.
  ASSERT_TRUE(WriteKeyFolder(folder_.path() + "/other", 1, 1).ok());
  // Their sends may time out: once the server has refused the handshake the
  // socket has no peer left to queue for (how soon depends on the machine's load),
  // so only what arrives and what the server logged are asserted.
  auto stranger = Client(client_context, router->endpoint(),
                         ReadKeyPair(folder_.path() + "/other", "worker-0").value(), 300);
  SocketOptions plain_options;
  plain_options.send_timeout_ms = 300;
  auto plain = ConnectDealer(client_context, router->endpoint(), plain_options);
  ASSERT_TRUE(plain.ok());
  (void)stranger->Send("", {MakeHeader(pstrain::HELLO, 0, 0), {}});
  (void)plain.value()->Send("", {MakeHeader(pstrain::HELLO, 0, 0), {}});
  EXPECT_TRUE(NothingArrives(*router, milliseconds(700)));
  // The ZAP handler and the socket monitor report on their own threads: wait
  // (up to 10 s on a loaded machine) until both have.
  int64_t refused = 0, handshake_failures = 0;
  std::vector<std::string> lines;
  pstrain::testing::Eventually(
      [&] {
        int64_t more = 0;
        for (std::string& line : server_context.TakeRefusals(&more)) {
          lines.push_back(std::move(line));
        }
        refused += more;
        handshake_failures += router->TakeHandshakeFailures();
        return refused >= 1 && handshake_failures >= 1;
      },
      std::chrono::seconds(10));
  EXPECT_GE(refused, 1);
  EXPECT_GE(handshake_failures, 1);
  ASSERT_FALSE(lines.empty());
  EXPECT_NE(lines[0].find("refused a connection from 127.0.0.1: key "), std::string::npos)
      << lines[0];
  EXPECT_NE(lines[0].find("is not one of this job's"), std::string::npos) << lines[0];
}

TEST_F(CurveTest, ACurveRouterNeedsAdmittedKeys) {
  Context context;
  SocketOptions options;
  options.curve_secret_key = Pair("server-0").secret_key;
  auto router = BindRouter(context, "tcp://127.0.0.1:*", options);
  ASSERT_FALSE(router.ok());
  EXPECT_NE(router.status().message().find("no keys are admitted"), std::string::npos);
}

InMessage Claimed(MessageType type, Role role, int sender, std::string user_id) {
  InMessage m;
  m.header = MakeHeader(type, sender, 0);
  m.header.set_role(role);
  m.user_id = std::move(user_id);
  return m;
}

TEST(ValidateAuthenticated, AKeySpeaksOnlyForItsOwnRank) {
  ValidationRules rules;
  rules.receiver = pstrain::SERVER;
  rules.num_workers = 2;
  rules.authenticated = true;
  EXPECT_TRUE(Validate(Claimed(pstrain::HEARTBEAT, pstrain::WORKER, 1, "worker 1"), rules).ok());
  EXPECT_EQ(Validate(Claimed(pstrain::HEARTBEAT, pstrain::WORKER, 0, "worker 1"), rules).message(),
            "sent as worker 0 by the key of worker 1");
  EXPECT_EQ(Validate(Claimed(pstrain::STATS, pstrain::CONTROL, 0, "worker 1"), rules).message(),
            "sent as control 0 by the key of worker 1");
  EXPECT_EQ(Validate(Claimed(pstrain::STATS, pstrain::WORKER, 1, "worker 1"), rules).message(),
            "STATS is accepted only from the orchestrator's key or worker 0's");
  EXPECT_EQ(Validate(Claimed(pstrain::HEARTBEAT, pstrain::WORKER, 1, ""), rules).message(),
            "sent as worker 1 by an unauthenticated peer");
  EXPECT_TRUE(Validate(Claimed(pstrain::SHUTDOWN, pstrain::CONTROL, 0, "control 0"), rules).ok());
  EXPECT_TRUE(Validate(Claimed(pstrain::SHUTDOWN, pstrain::WORKER, 0, "worker 0"), rules).ok());
}

TEST(ValidateAuthenticated, WithoutKeysOrJobKeyControlIsRefused) {
  ValidationRules rules;
  rules.receiver = pstrain::SERVER;
  rules.num_workers = 1;
  EXPECT_EQ(Validate(Claimed(pstrain::SHUTDOWN, pstrain::CONTROL, 0, ""), rules).message(),
            "SHUTDOWN from an unauthenticated peer (this server has neither CURVE keys nor a "
            "job key)");
  rules.job_key = 9;
  InMessage with_key = Claimed(pstrain::SHUTDOWN, pstrain::CONTROL, 0, "");
  with_key.header.set_job_key(9);
  EXPECT_TRUE(Validate(with_key, rules).ok());
}

}  // namespace
}  // namespace pstrain::transport
