// Tests of common/transport's channels and addresses: round trips over
// inproc, ipc and tcp (several peers on one ROUTER, replies routed by peer
// id), zero-copy sends, unaligned payload frames, undecodable headers, send
// errors, PollAny and MakeAddress. Every wait is bounded; tcp binds to
// 127.0.0.1 only.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "common/transport/address.hpp"
#include "common/transport/channel.hpp"
#include "common/transport/malloc_tuning.hpp"
#include "tests/cpp/transport_test_util.hpp"

namespace pstrain {
namespace {

using namespace std::chrono_literals;
using testing::MakeHeader;
using testing::MustReceive;
using testing::Ramp;
using transport::Channel;
using transport::InMessage;
using transport::OutMessage;
using transport::Payload;

// A ROUTER bound on one transport kind, and dealers connected to it.
class TransportKindTest : public ::testing::TestWithParam<std::string> {
 protected:
  std::string Address() {
    const std::string kind = GetParam();
    std::string host = kind == "tcp" ? "127.0.0.1" : kind == "ipc" ? folder_.path() + "/s0" : "s0";
    auto address = transport::MakeAddress(kind, host, 0);
    EXPECT_TRUE(address.ok()) << address.status().message();
    return address.ok() ? address.value() : "";
  }
  std::unique_ptr<Channel> Dealer(const std::string& endpoint, const std::string& identity) {
    transport::SocketOptions options;
    options.identity = identity;
    auto dealer = transport::ConnectDealer(ctx_, endpoint, options);
    EXPECT_TRUE(dealer.ok()) << dealer.status().message();
    return dealer.ok() ? std::move(dealer.value()) : nullptr;
  }

  testing::TempFolder folder_;
  transport::Context ctx_;
};

TEST_P(TransportKindTest, RoundTripSeveralPeersRoutedBackById) {
  auto router = transport::BindRouter(ctx_, Address());
  ASSERT_TRUE(router.ok()) << router.status().message();
  Channel& server = *router.value();
  std::vector<std::unique_ptr<Channel>> workers;
  for (int w = 0; w < 2; ++w) workers.push_back(Dealer(server.endpoint(), "w" + std::to_string(w)));
  ASSERT_TRUE(workers[0] && workers[1]);

  constexpr int kMessages = 3;
  for (int k = 0; k < kMessages; ++k) {
    for (int w = 0; w < 2; ++w) {
      OutMessage out{MakeHeader(PUSH, w, k, {{2, 5}, {7, 300}}), {}};
      auto values = Ramp(305, 1000.0f * w + 10.0f * k);
      out.payloads = {Payload::Slice(values, 0, 5), Payload::Slice(values, 5, 300)};
      ASSERT_TRUE(workers[w]->Send("", std::move(out)).ok());
    }
  }
  int64_t next_clock[2] = {0, 0};
  for (int i = 0; i < 2 * kMessages; ++i) {
    InMessage in = MustReceive(server);
    ASSERT_TRUE(in.peer == "w0" || in.peer == "w1") << in.peer;
    const int w = in.peer[1] - '0';
    EXPECT_EQ(in.header.sender(), w);
    EXPECT_EQ(in.header.clock(), next_clock[w]++);  // in order per peer
    ASSERT_EQ(in.payload_count(), 2u);
    ASSERT_EQ(in.payload_length(0), 5u);
    ASSERT_EQ(in.payload_length(1), 300u);
    const float first = 1000.0f * w + 10.0f * in.header.clock();
    EXPECT_EQ(in.payload(0)[0], first);
    EXPECT_EQ(in.payload(0)[4], first + 4);
    EXPECT_EQ(in.payload(1)[0], first + 5);
    EXPECT_EQ(in.payload(1)[299], first + 304);
    EXPECT_EQ(in.bytes(), in.header_bytes + 305 * sizeof(float));
    // Reply to the sender by its routing id.
    OutMessage reply{MakeHeader(PULL_REPLY, 0, in.header.clock(), {{0, 1}}), {}};
    reply.header.set_role(SERVER);
    reply.payloads = {Payload::Of(Ramp(1, static_cast<float>(w)))};
    ASSERT_TRUE(server.Send(in.peer, std::move(reply)).ok());
  }
  for (int w = 0; w < 2; ++w) {
    for (int k = 0; k < kMessages; ++k) {
      InMessage in = MustReceive(*workers[w]);
      EXPECT_EQ(in.peer, "");
      EXPECT_EQ(in.header.type(), PULL_REPLY);
      EXPECT_EQ(in.header.clock(), k);
      ASSERT_EQ(in.payload_count(), 1u);
      EXPECT_EQ(in.payload(0)[0], static_cast<float>(w));
    }
  }
}

TEST_P(TransportKindTest, GarbageHeaderIsConsumedAndTheChannelKeepsWorking) {
  auto router = transport::BindRouter(ctx_, Address());
  ASSERT_TRUE(router.ok()) << router.status().message();
  auto worker = Dealer(router.value()->endpoint(), "w0");
  ASSERT_TRUE(worker);
  std::vector<transport::Frame> garbage;
  garbage.emplace_back(std::string("\xff\xfe not a header"));
  garbage.emplace_back(std::string("payload"));
  ASSERT_TRUE(worker->SendFrames("", std::move(garbage)).ok());
  ASSERT_TRUE(worker->Send("", OutMessage{MakeHeader(HEARTBEAT, 0, 0), {}}).ok());

  auto bad = router.value()->Receive(5s);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            router.value()->endpoint() + ": message from peer 'w0': header does not parse");
  InMessage good = MustReceive(*router.value());
  EXPECT_EQ(good.header.type(), HEARTBEAT);
  EXPECT_EQ(good.payload_count(), 0u);
}

TEST_P(TransportKindTest, PayloadOwnerIsReleasedAfterTheSendAndBytesAreEqual) {
  auto router = transport::BindRouter(ctx_, Address());
  ASSERT_TRUE(router.ok()) << router.status().message();
  auto worker = Dealer(router.value()->endpoint(), "w0");
  ASSERT_TRUE(worker);
  constexpr size_t kValues = 1 << 20;  // 4 MiB
  auto values = Ramp(kValues, -5.5f);
  const std::vector<float> expected = *values;
  const float* sent_data = values->data();
  std::weak_ptr<const std::vector<float>> watch = values;
  OutMessage out{MakeHeader(PUSH, 0, 1, {{0, kValues}}), {Payload::Of(std::move(values))}};
  ASSERT_TRUE(worker->Send("", std::move(out)).ok());
  {
    InMessage in = MustReceive(*router.value());
    ASSERT_EQ(in.payload_length(0), kValues);
    EXPECT_EQ(std::memcmp(in.payload(0), expected.data(), kValues * sizeof(float)), 0);
    if (GetParam() == "inproc") {
      EXPECT_EQ(in.payload(0), sent_data);  // the very same memory: not copied at all
      EXPECT_FALSE(watch.expired());        // the receiver's frame still holds it
    }
  }
  // ZeroMQ drops the owner once the frame is sent (tcp, ipc: on its I/O thread).
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (!watch.expired() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_TRUE(watch.expired());
}

TEST_P(TransportKindTest, SmallAndOddlyPlacedPayloadsAreReadAligned) {
  auto router = transport::BindRouter(ctx_, Address());
  ASSERT_TRUE(router.ok()) << router.status().message();
  auto worker = Dealer(router.value()->endpoint(), "w0");
  ASSERT_TRUE(worker);
  // Header sizes vary with the text, so the payload lands at every offset
  // mod 4 in ZeroMQ's receive buffer (tcp, ipc) at least once.
  for (int pad = 0; pad < 4; ++pad) {
    for (size_t n : {1u, 3u, 8u, 9u, 100u}) {
      OutMessage out{MakeHeader(PUSH, 0, pad, {{1, n}}), {Payload::Of(Ramp(n, 0.25f))}};
      out.header.set_text(std::string(pad, 'x'));
      ASSERT_TRUE(worker->Send("", std::move(out)).ok());
      InMessage in = MustReceive(*router.value());
      ASSERT_EQ(in.payload_length(0), n);
      const float* p = in.payload(0);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % alignof(float), 0u);
      EXPECT_EQ(p[0], 0.25f);
      EXPECT_EQ(p[n - 1], 0.25f + static_cast<float>(n - 1));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Kinds, TransportKindTest, ::testing::Values("inproc", "ipc", "tcp"),
                         [](const auto& info) { return info.param; });

TEST(TransportTest, SendErrorsNameTheEndpointAndPeer) {
  transport::Context ctx;
  auto router = transport::BindRouter(ctx, "inproc://errors");
  ASSERT_TRUE(router.ok());
  const std::string endpoint = router.value()->endpoint();
  EXPECT_EQ(endpoint, "inproc://errors");
  Status gone = router.value()->Send("nobody", OutMessage{MakeHeader(HEARTBEAT, 0, 0), {}});
  EXPECT_EQ(gone.message(), endpoint + ": send to peer 'nobody': peer is unknown or gone");
  Status no_peer = router.value()->Send("", OutMessage{MakeHeader(HEARTBEAT, 0, 0), {}});
  EXPECT_EQ(no_peer.message(), endpoint + ": send on a ROUTER needs a peer");
  OutMessage mismatch{MakeHeader(PUSH, 0, 0, {{0, 2}, {1, 2}}), {Payload::Of(Ramp(2, 0))}};
  EXPECT_EQ(router.value()->Send("w", std::move(mismatch)).message(),
            endpoint + ": send to peer 'w': header lists 2 chunks but 1 payloads are given");
  OutMessage wrong_length{MakeHeader(PUSH, 0, 0, {{4, 3}}), {Payload::Of(Ramp(2, 0))}};
  EXPECT_EQ(router.value()->Send("w", std::move(wrong_length)).message(),
            endpoint + ": send to peer 'w': chunk 4: header says 3 values, the payload has 2");
  Header incomplete;
  incomplete.set_type(PULL);
  EXPECT_EQ(router.value()->Send("w", OutMessage{incomplete, {}}).message(),
            endpoint + ": send to peer 'w': header misses role, sender");
}

TEST(TransportTest, FullQueueFailsAfterTheSendTimeout) {
  transport::Context ctx;
  testing::TempFolder folder;
  transport::SocketOptions options;
  options.send_hwm = 1;
  options.send_timeout_ms = 50;
  // Nobody binds this path: messages queue until the high-water mark.
  const std::string address = "ipc://" + folder.path() + "/nobody";
  auto dealer = transport::ConnectDealer(ctx, address, options);
  ASSERT_TRUE(dealer.ok()) << dealer.status().message();
  Status status;
  int sent = 0;
  for (; sent < 100 && status.ok(); ++sent) {
    status = dealer.value()->Send("", OutMessage{MakeHeader(HEARTBEAT, 0, 0), {}});
  }
  EXPECT_LT(sent, 100);
  EXPECT_EQ(status.message(), address + ": send: queue full (high-water mark 1) for 50 ms");
}

TEST(TransportTest, PollAnyFindsTheDealerWithAMessage) {
  transport::Context ctx;
  std::vector<std::unique_ptr<Channel>> routers, dealers;
  for (int s = 0; s < 2; ++s) {
    auto router = transport::BindRouter(ctx, "inproc://poll" + std::to_string(s));
    auto dealer = transport::ConnectDealer(ctx, "inproc://poll" + std::to_string(s));
    ASSERT_TRUE(router.ok() && dealer.ok());
    routers.push_back(std::move(router.value()));
    dealers.push_back(std::move(dealer.value()));
  }
  std::vector<Channel*> both = {dealers[0].get(), dealers[1].get()};
  auto none = transport::PollAny(both, 20ms);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none.value(), -1);

  // Server 1 learns dealer 1's routing id from a HELLO and answers it.
  ASSERT_TRUE(dealers[1]->Send("", OutMessage{MakeHeader(HELLO, 0, 0), {}}).ok());
  InMessage hello = MustReceive(*routers[1]);
  ASSERT_TRUE(routers[1]->Send(hello.peer, OutMessage{MakeHeader(HELLO_ACK, 1, 0), {}}).ok());
  auto ready = transport::PollAny(both, 5s);
  ASSERT_TRUE(ready.ok());
  EXPECT_EQ(ready.value(), 1);
  EXPECT_EQ(MustReceive(*dealers[1]).header.type(), HELLO_ACK);
  EXPECT_EQ(transport::PollAny(both, 0ms).value(), -1);
}

// A poll of 1 ms with nothing to read waits that millisecond: rounded down to
// 0 it returned at once, and the shard's loop, which polls 1 ms while replies
// wait for their window, spun on a core. A lower bound only: the kernel may
// wake a poll late, never early.
TEST(TransportTest, AOneMillisecondPollWaitsAMillisecond) {
  transport::Context ctx;
  auto router = transport::BindRouter(ctx, "inproc://poll-ms");
  auto dealer = transport::ConnectDealer(ctx, "inproc://poll-ms");
  ASSERT_TRUE(router.ok() && dealer.ok());
  std::vector<Channel*> one = {dealer.value().get()};
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 20; ++i) {
    auto none = transport::PollAny(one, 1ms);
    ASSERT_TRUE(none.ok());
    EXPECT_EQ(none.value(), -1);
  }
  EXPECT_GE(std::chrono::steady_clock::now() - start, 20ms);
  // A single channel's receive the same.
  const auto again = std::chrono::steady_clock::now();
  for (int i = 0; i < 20; ++i) {
    auto got = dealer.value()->Receive(1ms);
    ASSERT_TRUE(got.ok());
    EXPECT_FALSE(got.value().has_value());
  }
  EXPECT_GE(std::chrono::steady_clock::now() - again, 20ms);
}

TEST(TransportTest, MakeAddressForEachKind) {
  EXPECT_EQ(transport::MakeAddress("tcp", "127.0.0.1", 5555).value(), "tcp://127.0.0.1:5555");
  EXPECT_EQ(transport::MakeAddress("tcp", "127.0.0.1", 0).value(), "tcp://127.0.0.1:*");
  EXPECT_EQ(transport::MakeAddress("tcp", "lo", 7).value(), "tcp://127.0.0.1:7");
  EXPECT_EQ(transport::MakeAddress("tcp", "localhost", 80).value(), "tcp://127.0.0.1:80");
  EXPECT_EQ(transport::MakeAddress("tcp", "*", 80).value(), "tcp://*:80");
  EXPECT_EQ(transport::MakeAddress("ipc", "/tmp/a.sock", 0).value(), "ipc:///tmp/a.sock");
  EXPECT_EQ(transport::MakeAddress("inproc", "shard0", 0).value(), "inproc://shard0");

  auto unknown = transport::MakeAddress("tcp", "no-such-host.invalid", 5555);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().message().rfind("cannot resolve host 'no-such-host.invalid': ", 0), 0u)
      << unknown.status().message();
  EXPECT_EQ(transport::MakeAddress("udp", "x", 1).status().message(),
            "unknown transport 'udp' (tcp, ipc or inproc)");
  EXPECT_EQ(transport::MakeAddress("tcp", "127.0.0.1", 70000).status().message(),
            "port 70000 is outside [0, 65535]");
  EXPECT_EQ(transport::MakeAddress("tcp", "127.0.0.1", -1).status().message(),
            "port -1 is outside [0, 65535]");
  EXPECT_EQ(transport::MakeAddress("inproc", "", 0).status().message(),
            "inproc address needs a host");
  EXPECT_EQ(transport::MakeAddress("ipc", "/" + std::string(200, 'p'), 0).status().message(),
            "ipc path '/" + std::string(200, 'p') + "' is longer than 107 bytes");
}

TEST(TransportTest, PortZeroBindsAFreePortThatDealersReach) {
  transport::Context ctx;
  auto router = transport::BindRouter(ctx, transport::MakeAddress("tcp", "127.0.0.1", 0).value());
  ASSERT_TRUE(router.ok()) << router.status().message();
  const std::string endpoint = router.value()->endpoint();
  EXPECT_TRUE(std::regex_match(endpoint, std::regex(R"(tcp://127\.0\.0\.1:[0-9]+)"))) << endpoint;
  EXPECT_NE(endpoint, "tcp://127.0.0.1:0");
  auto dealer = transport::ConnectDealer(ctx, endpoint);
  ASSERT_TRUE(dealer.ok());
  EXPECT_EQ(dealer.value()->endpoint(), endpoint);
  ASSERT_TRUE(dealer.value()->Send("", OutMessage{MakeHeader(HELLO, 3, 0), {}}).ok());
  EXPECT_EQ(MustReceive(*router.value()).header.sender(), 3);

  // The same port again is refused, with the reason.
  auto again = transport::BindRouter(ctx, endpoint);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().message(), "cannot bind " + endpoint + ": Address already in use");
}

TEST(TransportTest, DescribeAndPrintablePeer) {
  InMessage in;
  in.peer = std::string("\0\x8b\x45", 3);
  in.header = MakeHeader(PUSH, 2, 5);
  EXPECT_EQ(transport::PrintablePeer(in.peer), "0x008b45");
  EXPECT_EQ(transport::Describe(in), "PUSH from worker 2 (peer '0x008b45')");
  in.peer = "w2";
  EXPECT_EQ(transport::Describe(in), "PUSH from worker 2 (peer 'w2')");
}

TEST(TransportTest, MallocTuningIsAccepted) {
  EXPECT_TRUE(transport::TuneMallocForLargeFrames().ok());
}

// The I/O threads of a Context (transport.io_threads): a DEALER with
// io_thread k has its connection served by I/O thread k (ZeroMQ names it
// "ZMQbg/IO/k"). The test pins them crosswise, connection 0 on thread 1 and
// 1 on 0: unpinned, ZeroMQ gives the first connection the first thread (all
// look idle when it is made). Per thread of the process (tid): its name and
// CPU ns so far; `skip`: tids left out.
std::map<std::string, std::pair<std::string, int64_t>> IoThreads(
    const std::set<std::string>& skip) {
  std::map<std::string, std::pair<std::string, int64_t>> out;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    const std::string tid = task.path().filename().string();
    std::ifstream comm(task.path() / "comm");
    std::string name;
    std::getline(comm, name);
    if (skip.count(tid) || name.rfind("ZMQbg/IO", 0) != 0) continue;
    std::ifstream schedstat(task.path() / "schedstat");
    int64_t ns = 0;
    schedstat >> ns;
    out[tid] = {name, ns};
  }
  return out;
}

// The I/O threads of this process but `skip`, once `n` of them have named
// themselves (an I/O thread names itself once it runs; 2 s at most).
std::map<std::string, std::pair<std::string, int64_t>> NamedIoThreads(
    const std::set<std::string>& skip, size_t n) {
  std::map<std::string, std::pair<std::string, int64_t>> threads;
  for (int i = 0; i < 200 && (threads = IoThreads(skip)).size() < n; ++i) {
    std::this_thread::sleep_for(10ms);
  }
  return threads;
}

TEST(TransportTest, ConnectionsSpreadOverTheContextsIoThreads) {
  transport::Context server_ctx;
  std::vector<std::unique_ptr<Channel>> routers;
  for (int k = 0; k < 2; ++k) {
    auto router = transport::BindRouter(server_ctx, "tcp://127.0.0.1:*");
    ASSERT_TRUE(router.ok()) << router.status().message();
    routers.push_back(std::move(router.value()));
  }
  std::set<std::string> before;
  for (const auto& [tid, thread] : NamedIoThreads({}, 1)) before.insert(tid);  // the routers' context
  transport::Context ctx(2);
  EXPECT_EQ(ctx.io_threads(), 2);
  std::vector<std::unique_ptr<Channel>> dealers;
  for (int k = 0; k < 2; ++k) {
    transport::SocketOptions options;
    options.identity = "w" + std::to_string(k);
    options.io_thread = 1 - k;
    auto dealer = transport::ConnectDealer(ctx, routers[k]->endpoint(), options);
    ASSERT_TRUE(dealer.ok()) << dealer.status().message();
    dealers.push_back(std::move(dealer.value()));
  }
  ASSERT_EQ(NamedIoThreads(before, 2).size(), 2u);  // the client context's two I/O threads
  // 200 MB through one connection at a time: the thread that serves it does
  // the kernel copies, the other (heartbeats only) next to nothing.
  constexpr size_t kValues = 1 << 20;  // 4 MiB a message, 50 a connection
  for (int k = 0; k < 2; ++k) {
    const auto start = IoThreads(before);
    for (int m = 0; m < 50; ++m) {
      OutMessage out{MakeHeader(PUSH, k, m, {{0, kValues}}), {Payload::Of(Ramp(kValues, 1.f))}};
      ASSERT_TRUE(dealers[k]->Send("", std::move(out)).ok());
      EXPECT_EQ(MustReceive(*routers[k]).payload_length(0), kValues);
    }
    const auto end = IoThreads(before);
    std::vector<std::pair<int64_t, std::string>> busy;  // CPU ns, name
    for (const auto& [tid, thread] : start) {
      busy.emplace_back(end.at(tid).second - thread.second, thread.first);
    }
    std::sort(busy.rbegin(), busy.rend());
    EXPECT_EQ(busy[0].second, "ZMQbg/IO/" + std::to_string(1 - k)) << "connection " << k;
    EXPECT_GE(busy[0].first, 3 * busy[1].first)
        << "connection " << k << ": " << busy[0].first << " ns and " << busy[1].first << " ns";
  }
}

// A shard's context with several I/O threads (ps-server --io-threads,
// transport.io_threads): ZeroMQ serves each accepted connection on the least
// busy thread when it connects, so two workers that connect one after the
// other are served by two threads (their kernel copies and CURVE apart).
TEST(TransportTest, AcceptedConnectionsSpreadOverTheServersIoThreads) {
  transport::Context server_ctx(2);
  auto router = transport::BindRouter(server_ctx, "tcp://127.0.0.1:*");
  ASSERT_TRUE(router.ok()) << router.status().message();
  const auto server_threads = NamedIoThreads({}, 2);
  ASSERT_EQ(server_threads.size(), 2u);
  std::set<std::string> others;  // every I/O thread but the server's
  transport::Context client_ctx;
  std::vector<std::unique_ptr<Channel>> dealers;
  constexpr size_t kValues = 1 << 20;  // 4 MiB a message
  for (int k = 0; k < 2; ++k) {
    transport::SocketOptions options;
    options.identity = "w" + std::to_string(k);
    auto dealer = transport::ConnectDealer(client_ctx, router.value()->endpoint(), options);
    ASSERT_TRUE(dealer.ok()) << dealer.status().message();
    dealers.push_back(std::move(dealer.value()));
    // connected and served before the next one connects: a message through it
    OutMessage hello{MakeHeader(PUSH, k, 0, {{0, 4}}), {Payload::Of(Ramp(4, 1.f))}};
    ASSERT_TRUE(dealers[k]->Send("", std::move(hello)).ok());
    EXPECT_EQ(MustReceive(*router.value()).payload_length(0), 4u);
  }
  for (const auto& [tid, thread] : IoThreads({})) {
    if (!server_threads.count(tid)) others.insert(tid);
  }
  std::vector<std::string> busiest;
  for (int k = 0; k < 2; ++k) {
    const auto start = IoThreads(others);
    for (int m = 1; m <= 50; ++m) {
      OutMessage out{MakeHeader(PUSH, k, m, {{0, kValues}}), {Payload::Of(Ramp(kValues, 1.f))}};
      ASSERT_TRUE(dealers[k]->Send("", std::move(out)).ok());
      EXPECT_EQ(MustReceive(*router.value()).payload_length(0), kValues);
    }
    const auto end = IoThreads(others);
    std::vector<std::pair<int64_t, std::string>> busy;  // CPU ns, tid
    for (const auto& [tid, thread] : start) busy.emplace_back(end.at(tid).second - thread.second, tid);
    ASSERT_EQ(busy.size(), 2u);
    std::sort(busy.rbegin(), busy.rend());
    EXPECT_GE(busy[0].first, 3 * busy[1].first)
        << "connection " << k << ": " << busy[0].first << " ns and " << busy[1].first << " ns";
    busiest.push_back(busy[0].second);
  }
  EXPECT_NE(busiest[0], busiest[1]) << "both connections on the server's I/O thread " << busiest[0];
}

}  // namespace
}  // namespace pstrain
