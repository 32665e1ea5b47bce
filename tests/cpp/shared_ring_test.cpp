// Tests of common/transport/shared_ring: the ring's slots (placed, read in
// place, freed when the receiver drops them, reused after a wrap, a full
// ring), the receiver's checks on every field a message names (slot, place,
// state, token, size, a process that is gone; every one-byte corruption of a
// trailer), the trailer's encoding, and
// channels over ipc that move large payloads through the ring and small ones
// through the socket, with the same bytes either way.
#include "common/transport/shared_ring.hpp"

#include <grp.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

#include "common/transport/address.hpp"
#include "common/transport/channel.hpp"
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
using transport::RingReader;
using transport::RingSlot;
using transport::RingTrailer;
using transport::SendRing;

std::unique_ptr<SendRing> MakeRing(size_t bytes) {
  auto ring = SendRing::Create(bytes);
  EXPECT_TRUE(ring.ok()) << ring.status().message();
  return ring.ok() ? std::move(ring).value() : nullptr;
}

std::vector<float> Values(size_t n, float start) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = start + static_cast<float>(i);
  return v;
}

// The line of /proc/self/maps whose range holds `address` ("" when none).
std::string MappingOf(const void* address) {
  std::ifstream maps("/proc/self/maps");
  const auto at = reinterpret_cast<uintptr_t>(address);
  for (std::string line; std::getline(maps, line);) {
    uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream in(line);
    in >> std::hex >> lo >> dash >> hi;
    if (at >= lo && at < hi) return line;
  }
  return "";
}

bool InRing(const void* address) {
  return MappingOf(address).find("memfd:pstrain-ring") != std::string::npos;
}

TEST(SharedRingTest, PayloadIsReadInPlaceAndItsSlotFreedWhenDropped) {
  auto ring = MakeRing(1 << 20);
  ASSERT_TRUE(ring);
  const std::vector<float> a = Values(150000, 1.f);  // 600 KB
  std::optional<RingSlot> slot = ring->Put(a.data(), a.size() * sizeof(float));
  ASSERT_TRUE(slot.has_value());
  EXPECT_EQ(slot->offset, 0u);
  EXPECT_EQ(slot->bytes, a.size() * sizeof(float));

  RingReader reader;
  auto taken = reader.Take(ring->id(), *slot);
  ASSERT_TRUE(taken.ok()) << taken.status().message();
  Payload payload = std::move(taken).value();
  ASSERT_EQ(payload.count, a.size());
  EXPECT_EQ(std::memcmp(payload.data, a.data(), a.size() * sizeof(float)), 0);
  EXPECT_TRUE(InRing(payload.data)) << MappingOf(payload.data);

  // 600 KB more do not fit beside the held slot; once it is dropped they do,
  // at the start of the ring again.
  EXPECT_FALSE(ring->Put(a.data(), a.size() * sizeof(float)).has_value());
  payload = Payload{};
  std::optional<RingSlot> again = ring->Put(a.data(), a.size() * sizeof(float));
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->offset, 0u);
  EXPECT_NE(again->entry, slot->entry);
}

TEST(SharedRingTest, WrapsAroundBehindTheOldestHeldSlot) {
  auto ring = MakeRing(1 << 20);
  ASSERT_TRUE(ring);
  RingReader reader;
  const std::vector<float> a = Values(100000, 0.f), b = Values(100000, 1e6f),
                           c = Values(75000, -1e6f);  // 400, 400 and 300 KB
  auto put_take = [&](const std::vector<float>& v) {
    std::optional<RingSlot> slot = ring->Put(v.data(), v.size() * sizeof(float));
    EXPECT_TRUE(slot.has_value());
    auto payload = reader.Take(ring->id(), slot.value_or(RingSlot{}));
    EXPECT_TRUE(payload.ok()) << payload.status().message();
    return std::make_pair(*slot, payload.ok() ? std::move(payload).value() : Payload{});
  };
  auto [slot_a, pa] = put_take(a);
  auto [slot_b, pb] = put_take(b);
  EXPECT_EQ(slot_b.offset, 400000u);
  pa = Payload{};  // the oldest slot is free: c fits in front of b
  auto [slot_c, pc] = put_take(c);
  EXPECT_EQ(slot_c.offset, 0u);
  EXPECT_EQ(std::memcmp(pb.data, b.data(), b.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(pc.data, c.data(), c.size() * sizeof(float)), 0);
  // Neither 400 KB after b nor 100 KB between c and b hold another 300 KB.
  EXPECT_FALSE(ring->Put(c.data(), c.size() * sizeof(float)).has_value());
}

TEST(SharedRingTest, StuckOnlyWhenFullAndTheOldestSlotIsHeldPastPatience) {
  auto ring = MakeRing(1 << 20);
  ASSERT_TRUE(ring);
  const std::vector<float> a = Values(200000, 0.f);  // 800 KB
  ASSERT_TRUE(ring->Put(a.data(), a.size() * sizeof(float)).has_value());
  EXPECT_FALSE(ring->Stuck(0ms));  // not full yet
  EXPECT_FALSE(ring->Put(a.data(), a.size() * sizeof(float)).has_value());
  EXPECT_FALSE(ring->Stuck(10s));
  std::this_thread::sleep_for(5ms);
  EXPECT_TRUE(ring->Stuck(1ms));
}

TEST(SharedRingTest, ReceiverRefusesSlotsTheRingDoesNotHold) {
  auto ring = MakeRing(1 << 20);
  ASSERT_TRUE(ring);
  const std::vector<float> a = Values(8192, 0.f);
  std::optional<RingSlot> slot = ring->Put(a.data(), a.size() * sizeof(float));
  ASSERT_TRUE(slot.has_value());
  const std::string name = "shared-memory ring of process " + std::to_string(getpid()) +
                           " (descriptor " + std::to_string(ring->id().fd) + ")";
  RingReader reader;
  auto refused = [&](RingSlot s) {
    auto got = reader.Take(ring->id(), s);
    EXPECT_FALSE(got.ok());
    return got.ok() ? std::string() : got.status().message();
  };
  RingSlot bad = *slot;
  bad.entry = 5000;
  EXPECT_EQ(refused(bad), name + ": slot 5000: no such slot");
  bad = *slot;
  bad.offset = (1 << 20) - 64;
  EXPECT_EQ(refused(bad), name + ": slot 0: 32768 bytes at 1048512 do not fit the ring's 1048576");
  bad = *slot;
  bad.bytes = 16;
  EXPECT_EQ(refused(bad), name + ": slot 0: the message's place differs from the ring's");
  bad = *slot;
  bad.entry = 1;
  EXPECT_EQ(refused(bad), name + ": slot 1: the message's place differs from the ring's");

  auto first = reader.Take(ring->id(), *slot);
  ASSERT_TRUE(first.ok()) << first.status().message();
  EXPECT_EQ(refused(*slot), name + ": slot 0: not held for a receiver (state 2)");
  first = Payload{};
  EXPECT_EQ(refused(*slot), name + ": slot 0: not held for a receiver (state 0)");

  transport::RingId forged = ring->id();
  forged.token[3] ^= 1;
  auto wrong = reader.Take(forged, *slot);
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().message(),
            name + ": its header does not match the message's token and size");
  forged = ring->id();
  forged.file_bytes += 4096;
  wrong = reader.Take(forged, *slot);
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().message(),
            name + ": /proc/" + std::to_string(getpid()) + "/fd/" + std::to_string(ring->id().fd) +
                " is not this user's ring of " + std::to_string(forged.file_bytes) + " bytes");
}

// Runs `body` in a forked child and returns the text it returned; "" when the
// child failed, returned nothing or could not write it all.
std::string InChild(const std::function<std::string()>& body) {
  int fds[2];
  if (pipe(fds) != 0) return "";
  const pid_t child = fork();
  if (child < 0) return "";
  if (child == 0) {
    close(fds[0]);
    const std::string text = body();
    const bool ok = !text.empty() &&
                    write(fds[1], text.data(), text.size()) == static_cast<ssize_t>(text.size());
    _exit(ok ? 0 : 1);
  }
  close(fds[1]);
  std::string text;
  char buffer[512];
  for (ssize_t n; (n = read(fds[0], buffer, sizeof(buffer))) > 0;) {
    text.append(buffer, static_cast<size_t>(n));
  }
  close(fds[0]);
  int status = 0;
  const bool exited_ok =
      waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  return exited_ok ? text : "";
}

TEST(SharedRingTest, RingOfAProcessThatExitedCannotBeOpened) {
  // The sender puts one slot, says where, and exits.
  const std::string bytes = InChild([] {
    auto ring = SendRing::Create(1 << 16);
    if (!ring.ok()) return std::string();
    const std::vector<float> v = Values(8192, 3.f);
    std::optional<RingSlot> slot = ring.value()->Put(v.data(), v.size() * sizeof(float));
    return slot ? transport::EncodeTrailer(RingTrailer{ring.value()->id(), {*slot}})
                : std::string();
  });
  auto trailer = transport::DecodeTrailer(bytes.data(), bytes.size());
  ASSERT_TRUE(trailer.ok()) << trailer.status().message();
  ASSERT_EQ(trailer.value().slots.size(), 1u);
  const transport::RingId& id = trailer.value().ring;
  RingReader reader;
  auto got = reader.Take(id, trailer.value().slots[0]);
  ASSERT_FALSE(got.ok());
  const std::string path = "/proc/" + std::to_string(id.pid) + "/fd/" + std::to_string(id.fd);
  EXPECT_EQ(got.status().message(), "shared-memory ring of process " + std::to_string(id.pid) +
                                        " (descriptor " + std::to_string(id.fd) +
                                        "): cannot open " + path + ": No such file or directory");
}

TEST(SharedRingTest, AnotherUserCannotOpenTheRing) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to become another user";
  auto ring = MakeRing(1 << 16);
  ASSERT_TRUE(ring);
  const std::vector<float> v = Values(8192, 1.f);
  std::optional<RingSlot> slot = ring->Put(v.data(), v.size() * sizeof(float));
  ASSERT_TRUE(slot.has_value());
  const transport::RingId id = ring->id();
  // User "nobody" tries the ring through /proc, as a peer would.
  const std::string text = InChild([&] {
    close(id.fd);  // not its own copy of the descriptor
    if (setgroups(0, nullptr) != 0 || setgid(65534) != 0 || setuid(65534) != 0) {
      return std::string();
    }
    RingReader reader;
    auto got = reader.Take(id, *slot);
    return got.ok() ? std::string("OPENED") : got.status().message();
  });
  const std::string path = "/proc/" + std::to_string(getpid()) + "/fd/" + std::to_string(id.fd);
  EXPECT_EQ(text, "shared-memory ring of process " + std::to_string(getpid()) + " (descriptor " +
                      std::to_string(id.fd) + "): cannot open " + path + ": Permission denied");
  // The owner itself still can.
  RingReader reader;
  EXPECT_TRUE(reader.Take(id, *slot).ok());
}

TEST(SharedRingTest, TrailerRoundTripsAndBadOnesAreNamed) {
  RingTrailer t;
  t.ring.pid = 1234;
  t.ring.fd = 7;
  for (int i = 0; i < 16; ++i) t.ring.token[i] = static_cast<uint8_t>(i * 17);
  t.ring.file_bytes = 1 << 24;
  t.slots = {RingSlot{0, 3, 64, 4096}, RingSlot{2, 4, 4160, 65536}};
  const std::string bytes = transport::EncodeTrailer(t);
  ASSERT_TRUE(transport::LooksLikeTrailer(bytes.data(), bytes.size()));
  auto back = transport::DecodeTrailer(bytes.data(), bytes.size());
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back.value().ring.pid, 1234u);
  EXPECT_EQ(back.value().ring.fd, 7);
  EXPECT_EQ(std::memcmp(back.value().ring.token, t.ring.token, 16), 0);
  EXPECT_EQ(back.value().ring.file_bytes, uint64_t{1} << 24);
  ASSERT_EQ(back.value().slots.size(), 2u);
  EXPECT_EQ(back.value().slots[1].frame, 2u);
  EXPECT_EQ(back.value().slots[1].entry, 4u);
  EXPECT_EQ(back.value().slots[1].offset, 4160u);
  EXPECT_EQ(back.value().slots[1].bytes, 65536u);

  auto cut = transport::DecodeTrailer(bytes.data(), bytes.size() - 1);
  ASSERT_FALSE(cut.ok());
  EXPECT_EQ(cut.status().message(), "shared-memory trailer: it lists 2 slots in 91 bytes");
  auto tiny = transport::DecodeTrailer(bytes.data(), 10);
  ASSERT_FALSE(tiny.ok());
  EXPECT_EQ(tiny.status().message(), "shared-memory trailer: 10 bytes is not a trailer");
  EXPECT_FALSE(transport::LooksLikeTrailer("PSTRSHM", 7));
}

TEST(SharedRingTest, EveryOneByteCorruptionOfATrailerIsRefusedOrReadsInsideTheRing) {
  const std::vector<float> a = Values(8192, 0.f), b = Values(16384, 1.f);
  int refused = 0, read = 0;
  for (size_t at = 0; at < 92; ++at) {  // every byte of a two-slot trailer
    for (int change : {0x01, 0x80, 0xff}) {
      auto ring = MakeRing(1 << 20);  // a fresh ring and receiver: every check runs again
      ASSERT_TRUE(ring);
      std::optional<RingSlot> sa = ring->Put(a.data(), a.size() * sizeof(float));
      std::optional<RingSlot> sb = ring->Put(b.data(), b.size() * sizeof(float));
      ASSERT_TRUE(sa && sb);
      sb->frame = 1;
      std::string bad = transport::EncodeTrailer(RingTrailer{ring->id(), {*sa, *sb}});
      ASSERT_EQ(bad.size(), 92u);
      bad[at] = static_cast<char>(bad[at] ^ change);
      auto trailer = transport::DecodeTrailer(bad.data(), bad.size());
      if (!trailer.ok()) {
        ++refused;
        continue;
      }
      RingReader reader;
      std::vector<Payload> taken;
      for (const RingSlot& slot : trailer.value().slots) {
        auto payload = reader.Take(trailer.value().ring, slot);
        if (!payload.ok()) {
          ++refused;
          continue;
        }
        ++read;
        // Only ever the very slot that was put: its place, its length, its values.
        const Payload& got = payload.value();
        const std::vector<float>& put = slot.entry == sa->entry ? a : b;
        ASSERT_TRUE(slot.entry == sa->entry || slot.entry == sb->entry);
        ASSERT_TRUE(InRing(got.data));
        ASSERT_EQ(got.count, put.size());
        ASSERT_EQ(std::memcmp(got.data, put.data(), put.size() * sizeof(float)), 0);
        taken.push_back(std::move(payload).value());
      }
    }
  }
  // Both slots read when a frame index changed (the ring does not know those:
  // the channel checks them against the message), the other slot when one
  // slot's entry, offset or length changed; nothing when the ring's name did.
  EXPECT_EQ(read, 2 * (2 * 4 * 3) + 2 * 20 * 3);
  EXPECT_GT(refused, 92 * 3 - 2 * 4 * 3);
}

// A ROUTER and DEALERs over ipc, with or without shared memory.
class SharedRingChannelTest : public ::testing::Test {
 protected:
  std::unique_ptr<Channel> Bind(size_t ring_bytes, int64_t max_frame_bytes = -1) {
    auto address = transport::MakeAddress("ipc", folder_.path() + "/s0", 0);
    EXPECT_TRUE(address.ok());
    transport::SocketOptions options;
    options.shared_memory_bytes = ring_bytes;
    options.max_message_bytes = max_frame_bytes;
    auto router = transport::BindRouter(ctx_, address.value(), options);
    EXPECT_TRUE(router.ok()) << router.status().message();
    return router.ok() ? std::move(router).value() : nullptr;
  }
  std::unique_ptr<Channel> Dealer(const std::string& endpoint, const std::string& identity,
                                  size_t ring_bytes) {
    transport::SocketOptions options;
    options.identity = identity;
    options.shared_memory_bytes = ring_bytes;
    auto dealer = transport::ConnectDealer(ctx_, endpoint, options);
    EXPECT_TRUE(dealer.ok()) << dealer.status().message();
    return dealer.ok() ? std::move(dealer).value() : nullptr;
  }
  // A PUSH from worker `w` with a small chunk (inline) and a large one.
  static OutMessage Push(int w, int64_t clock, size_t large) {
    OutMessage out{MakeHeader(PUSH, w, clock, {{1, 5}, {2, large}}), {}};
    auto values = Ramp(5 + large, 1000.0f * w + 10.0f * static_cast<float>(clock));
    out.payloads = {Payload::Slice(values, 0, 5), Payload::Slice(values, 5, large)};
    return out;
  }
  static void ExpectPush(const InMessage& in, int w, int64_t clock, size_t large) {
    ASSERT_EQ(in.payload_count(), 2u);
    ASSERT_EQ(in.payload_length(0), 5u);
    ASSERT_EQ(in.payload_length(1), large);
    const float first = 1000.0f * w + 10.0f * static_cast<float>(clock);
    for (size_t i = 0; i < 5; ++i) ASSERT_EQ(in.payload(0)[i], first + static_cast<float>(i));
    for (size_t i = 0; i < large; i += 997) {
      ASSERT_EQ(in.payload(1)[i], first + 5 + static_cast<float>(i)) << i;
    }
    EXPECT_EQ(in.payload(1)[large - 1], first + 4 + static_cast<float>(large));
  }

  testing::TempFolder folder_;
  transport::Context ctx_;
};

TEST_F(SharedRingChannelTest, LargePayloadsGoThroughTheRingSmallOnesThroughTheSocket) {
  constexpr size_t kLarge = 300000;
  auto router = Bind(16 << 20);
  ASSERT_TRUE(router);
  auto worker = Dealer(router->endpoint(), "w0", 16 << 20);
  ASSERT_TRUE(worker);
  for (int64_t clock = 0; clock < 3; ++clock) {
    ASSERT_TRUE(worker->Send("", Push(0, clock, kLarge)).ok());
  }
  for (int64_t clock = 0; clock < 3; ++clock) {
    InMessage in = MustReceive(*router);
    EXPECT_EQ(in.header.clock(), clock);
    ExpectPush(in, 0, clock, kLarge);
    EXPECT_TRUE(InRing(in.payload(1))) << MappingOf(in.payload(1));
    EXPECT_FALSE(InRing(in.payload(0)));
  }
  EXPECT_EQ(worker->ring_traffic().sent, int64_t{3 * kLarge * sizeof(float)});
  EXPECT_EQ(router->ring_traffic().received, int64_t{3 * kLarge * sizeof(float)});

  // Replies through the ROUTER's ring for that peer.
  OutMessage reply = Push(0, 9, kLarge);
  reply.header.set_type(PULL_REPLY);
  ASSERT_TRUE(router->Send("w0", std::move(reply)).ok());
  InMessage back = MustReceive(*worker);
  ExpectPush(back, 0, 9, kLarge);
  EXPECT_TRUE(InRing(back.payload(1)));
  EXPECT_EQ(worker->ring_traffic().received, int64_t{kLarge * sizeof(float)});
}

TEST_F(SharedRingChannelTest, WithoutSharedMemoryEverythingGoesThroughTheSocket) {
  constexpr size_t kLarge = 300000;
  auto router = Bind(0);
  ASSERT_TRUE(router);
  auto worker = Dealer(router->endpoint(), "w0", 0);
  ASSERT_TRUE(worker);
  ASSERT_TRUE(worker->Send("", Push(0, 0, kLarge)).ok());
  InMessage in = MustReceive(*router);
  ExpectPush(in, 0, 0, kLarge);
  EXPECT_FALSE(InRing(in.payload(1)));
  EXPECT_EQ(worker->ring_traffic().sent, 0);
}

TEST_F(SharedRingChannelTest, AFullRingSendsThroughTheSocketAndFreesAsTheReceiverDrops) {
  constexpr size_t kLarge = 200000;  // 800 KB: one fits a 1 MiB ring
  auto router = Bind(1 << 20);
  ASSERT_TRUE(router);
  auto worker = Dealer(router->endpoint(), "w0", 1 << 20);
  ASSERT_TRUE(worker);
  for (int64_t clock = 0; clock < 3; ++clock) {
    ASSERT_TRUE(worker->Send("", Push(0, clock, kLarge)).ok());
  }
  std::vector<InMessage> held;
  for (int64_t clock = 0; clock < 3; ++clock) {
    held.push_back(MustReceive(*router));
    ExpectPush(held.back(), 0, clock, kLarge);
  }
  EXPECT_TRUE(InRing(held[0].payload(1)));
  EXPECT_FALSE(InRing(held[1].payload(1)));
  EXPECT_FALSE(InRing(held[2].payload(1)));
  held.clear();  // the slot is free again
  ASSERT_TRUE(worker->Send("", Push(0, 3, kLarge)).ok());
  InMessage in = MustReceive(*router);
  ExpectPush(in, 0, 3, kLarge);
  EXPECT_TRUE(InRing(in.payload(1)));
  EXPECT_EQ(router->ring_traffic().received, int64_t{2 * kLarge * sizeof(float)});
}

TEST_F(SharedRingChannelTest, BadTrailerIsAnErrorNamingTheSenderAndTheChannelGoesOn) {
  auto router = Bind(16 << 20);
  ASSERT_TRUE(router);
  auto worker = Dealer(router->endpoint(), "w0", 16 << 20);
  ASSERT_TRUE(worker);
  // A trailer naming a descriptor this process does not have.
  RingTrailer t;
  t.ring.pid = static_cast<uint32_t>(getpid());
  t.ring.fd = 100000;
  t.ring.file_bytes = (16 << 20) + 86016;
  t.slots = {RingSlot{0, 0, 0, 32768}};
  std::vector<transport::Frame> frames;
  Header header = MakeHeader(PUSH, 0, 0, {{2, 8192}});
  frames.emplace_back(header.SerializeAsString());
  frames.emplace_back();  // the payload, said to be in the ring
  frames.emplace_back(transport::EncodeTrailer(t));
  ASSERT_TRUE(worker->SendFrames("", std::move(frames)).ok());
  // A trailer that points at a payload frame that is not empty.
  frames.clear();
  frames.emplace_back(header.SerializeAsString());
  frames.emplace_back(std::string(32768, 'x'));
  frames.emplace_back(transport::EncodeTrailer(t));
  ASSERT_TRUE(worker->SendFrames("", std::move(frames)).ok());
  ASSERT_TRUE(worker->Send("", Push(0, 1, 300000)).ok());

  const std::string from = router->endpoint() + ": message from peer 'w0': ";
  auto bad = router->Receive(5s);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            from + "shared-memory ring of process " + std::to_string(getpid()) +
                " (descriptor 100000): cannot open /proc/" + std::to_string(getpid()) +
                "/fd/100000: No such file or directory");
  bad = router->Receive(5s);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            from + "shared-memory trailer: payload frame 0 is not an empty frame of the message");
  InMessage good = MustReceive(*router);
  ExpectPush(good, 0, 1, 300000);
}

TEST_F(SharedRingChannelTest, FrameSizeLimitHoldsForRingSlotsAndRefusedSlotsAreGivenBack) {
  auto router = Bind(2 << 20, /*max_frame_bytes=*/1 << 20);
  ASSERT_TRUE(router);
  auto worker = Dealer(router->endpoint(), "w0", 2 << 20);
  ASSERT_TRUE(worker);
  ASSERT_TRUE(worker->Send("", Push(0, 0, 300000)).ok());  // 1.2 MB in one frame
  ASSERT_TRUE(worker->Send("", Push(0, 1, 200000)).ok());  // 800 KB, behind it
  auto bad = router->Receive(5s);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            router->endpoint() +
                ": message from peer 'w0': shared-memory trailer: payload frame 1 has 1200000 "
                "bytes, more than the 1048576 a frame may have");
  InMessage held = MustReceive(*router);
  ExpectPush(held, 0, 1, 200000);
  EXPECT_TRUE(InRing(held.payload(1)));
  // The refused 1.2 MB were given back: 800 KB more fit in front of the held
  // slot (had they stayed held, this one would have gone through the socket).
  ASSERT_TRUE(worker->Send("", Push(0, 2, 200000)).ok());
  InMessage in = MustReceive(*router);
  ExpectPush(in, 0, 2, 200000);
  EXPECT_TRUE(InRing(in.payload(1))) << MappingOf(in.payload(1));
}

}  // namespace
}  // namespace pstrain
