// The real ps-server program under bad input: garbage frames, a stranger's job
// key, a malformed push — each dropped, logged and counted in STATS and in the
// last line, no weight changed — and a clean exit on SHUTDOWN. Every wait is
// bounded; the process is killed in TearDown if it is still there.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "common/transport/channel.hpp"
#include "tests/cpp/process_test_util.hpp"
#include "tests/cpp/program_path.hpp"
#include "tests/cpp/transport_test_util.hpp"

namespace pstrain {
namespace {

using transport::InMessage;
using transport::OutMessage;
using transport::Payload;

constexpr uint64_t kJobKey = 77;

class PsServerProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("ps_server_process_test_" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
    std::ofstream(dir_ / "solver.prototxt")
        << "base_lr: 0.5\nlr_policy: \"fixed\"\nmax_iter: 10\nsnapshot_after_train: false\n"
           "net: \"unused\"\n";
    server_ = std::make_unique<testing::ServerProcess>(
        std::vector<std::string>{"--solver", (dir_ / "solver.prototxt").string(), "--workers", "1",
                                 "--job-key", std::to_string(kJobKey), "--idle-exit-s", "30"});
    ASSERT_TRUE(server_->started());
    endpoint_ = server_->endpoint();
    auto dealer = transport::ConnectDealer(context_, endpoint_);
    ASSERT_TRUE(dealer.ok()) << dealer.status().message();
    channel_ = std::move(dealer).value();
  }

  void TearDown() override {
    channel_.reset();
    server_.reset();  // killed if still running, and reaped
    std::filesystem::remove_all(dir_);
  }

  pstrain::Header Header(pstrain::MessageType type, uint64_t key = kJobKey) {
    return testing::WorkerZeroHeader(type, key);
  }

  std::optional<InMessage> Expect(pstrain::MessageType type) {
    return testing::ExpectMessage(*channel_, type, std::chrono::seconds(10));
  }

  std::filesystem::path dir_;
  std::unique_ptr<testing::ServerProcess> server_;
  std::string endpoint_;
  transport::Context context_;
  std::unique_ptr<transport::Channel> channel_;
};

// The value of "key" in a flat JSON line, as text; "" when absent. Fails the
// test when the key appears more than once.
std::string JsonField(const std::string& line, const std::string& key) {
  const std::string quoted = "\"" + key + "\":";
  const size_t at = line.find(quoted);
  if (at == std::string::npos) return "";
  EXPECT_EQ(line.find(quoted, at + 1), std::string::npos) << key << " twice in " << line;
  const size_t begin = at + quoted.size();
  size_t end = begin;
  int depth = 0;
  while (end < line.size() && (depth > 0 || (line[end] != ',' && line[end] != '}'))) {
    if (line[end] == '[') ++depth;
    if (line[end] == ']') --depth;
    ++end;
  }
  return line.substr(begin, end - begin);
}

TEST_F(PsServerProcessTest, DropsBadMessagesAndKeepsWeights) {
  // Frames that are not a header.
  constexpr int kGarbage = 20;
  for (int i = 0; i < kGarbage; ++i) {
    std::vector<transport::Frame> garbage;
    garbage.emplace_back(std::string("\x01\x02garbage"));
    ASSERT_TRUE(channel_->SendFrames("", std::move(garbage)).ok());
  }
  // A stranger's job key: dropped without an answer.
  ASSERT_TRUE(channel_->Send("", OutMessage{Header(pstrain::HELLO, 999), {}}).ok());

  OutMessage hello{Header(pstrain::HELLO), {}};
  hello.header.set_world_size(1);
  ASSERT_TRUE(channel_->Send("", std::move(hello)).ok());
  ASSERT_TRUE(Expect(pstrain::HELLO_ACK));

  ASSERT_TRUE(channel_
                  ->Send("", testing::OneChunkInitPush(Header(pstrain::INIT_PUSH), "w",
                                                       std::vector<float>{1, 2, 3, 4}))
                  .ok());
  ASSERT_TRUE(Expect(pstrain::INIT_ACK));

  // A push whose payload is shorter than the chunk: dropped before the shard sees it.
  auto short_grad = std::make_shared<std::vector<float>>(std::vector<float>{9, 9});
  OutMessage bad_push{Header(pstrain::PUSH), {}};
  bad_push.header.set_clock(0);
  auto* bad_ref = bad_push.header.add_chunks();
  bad_ref->set_id(0);
  bad_ref->set_length(2);
  bad_push.payloads.push_back(Payload::Of(short_grad));
  ASSERT_TRUE(channel_->Send("", std::move(bad_push)).ok());

  OutMessage pull{Header(pstrain::PULL), {}};
  pull.header.set_clock(0);
  ASSERT_TRUE(channel_->Send("", std::move(pull)).ok());
  auto reply = Expect(pstrain::PULL_REPLY);
  ASSERT_TRUE(reply);
  ASSERT_EQ(reply->payload_count(), 1u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(reply->payload(0)[i], static_cast<float>(i + 1));

  // A good push of gradient 1 with lr 0.5 moves every weight by -0.5.
  auto grad = std::make_shared<std::vector<float>>(std::vector<float>{1, 1, 1, 1});
  OutMessage push{Header(pstrain::PUSH), {}};
  push.header.set_clock(0);
  auto* good_ref = push.header.add_chunks();
  good_ref->set_id(0);
  good_ref->set_length(4);
  push.payloads.push_back(Payload::Of(grad));
  ASSERT_TRUE(channel_->Send("", std::move(push)).ok());
  ASSERT_TRUE(Expect(pstrain::PUSH_ACK));
  OutMessage pull1{Header(pstrain::PULL), {}};
  pull1.header.set_clock(1);
  ASSERT_TRUE(channel_->Send("", std::move(pull1)).ok());
  reply = Expect(pstrain::PULL_REPLY);
  ASSERT_TRUE(reply);
  for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(reply->payload(0)[i], i + 1 - 0.5f);

  // STATS counts every bad message: the garbage, the stranger, the short push.
  ASSERT_TRUE(channel_->Send("", OutMessage{Header(pstrain::STATS), {}}).ok());
  auto stats = Expect(pstrain::STATS);
  ASSERT_TRUE(stats);
  EXPECT_EQ(stats->header.stats().bad_messages(), kGarbage + 2);
  EXPECT_EQ(stats->header.stats().pushes_applied(), 1);

  ASSERT_TRUE(channel_->Send("", OutMessage{Header(pstrain::SHUTDOWN), {}}).ok());
  ASSERT_TRUE(Expect(pstrain::SHUTDOWN));
  EXPECT_EQ(server_->Wait(10), 0) << "ps-server did not exit cleanly after SHUTDOWN";
  // Its last line: each field once, the same counts as STATS.
  const std::string& all = server_->rest();
  std::string done;
  std::istringstream lines(all);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("\"event\":\"done\"") != std::string::npos) done = line;
  }
  ASSERT_FALSE(done.empty()) << all;
  EXPECT_EQ(JsonField(done, "bad_messages"), std::to_string(kGarbage + 2)) << done;
  EXPECT_EQ(JsonField(done, "pushes_applied"), "1") << done;
  EXPECT_EQ(JsonField(done, "staleness_histogram"), "[1]") << done;
  EXPECT_EQ(JsonField(done, "version"), "1") << done;
  EXPECT_EQ(JsonField(done, "staleness_max"), "0") << done;
  // The first 10 drops are logged with their reason (the garbage came first),
  // the rest counted in one line at exit that names the latest.
  size_t in_full = 0;
  for (size_t at = all.find("header does not parse"); at != std::string::npos;
       at = all.find("header does not parse", at + 1)) {
    ++in_full;
  }
  EXPECT_EQ(in_full, 10u) << all;
  EXPECT_NE(all.find("12 more dropped or refused in the last"), std::string::npos) << all;
  EXPECT_NE(all.find("(22 in all); the latest: dropped PUSH from worker 0 (peer '"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("chunk 0: header says 2 values, the chunk has 4"), std::string::npos) << all;
  EXPECT_EQ(all.find("libprotobuf"), std::string::npos) << all;
}

TEST(PsServerFlagsTest, AnUnknownModeIsOneClearError) {
  const std::string bin = ProgramPath("ps-server");
  FILE* out = popen((bin + " --solver /nonexistent.prototxt --mode sync 2>&1").c_str(), "r");
  ASSERT_NE(out, nullptr);
  std::string text;
  char line[512];
  while (fgets(line, sizeof(line), out)) text += line;
  const int status = pclose(out);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 1);
  EXPECT_EQ(text, "ps-server 0: --mode: mode \"sync\" is not one of bsp, ssp, asp\n");
}

// The worked example's flag reaches the shard's config: each bad value is one
// clear error naming the flag.
TEST(PsServerFlagsTest, StalenessPerWorkerIsParsedAndValidated) {
  const std::string bin = ProgramPath("ps-server");
  const std::string solver =
      std::string(PSTRAIN_SOURCE_DIR) + "/configs/nets/lenet_solver.prototxt";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--mode ssp --staleness-per-worker 1,x",
       "ps-server 0: --staleness-per-worker: \"1,x\" is not a list of integers (as 2,4)\n"},
      {"--mode bsp --staleness-per-worker 1,2",
       "ps-server 0: --staleness-per-worker applies to ssp only, the mode is bsp\n"},
      {"--mode ssp --staleness-per-worker 1,2,3",
       "ps-server 0: --staleness-per-worker has 3 bounds for 2 workers (one per worker)\n"},
  };
  for (const auto& [flags, expected] : cases) {
    FILE* out =
        popen((bin + " --workers 2 --solver " + solver + " " + flags + " 2>&1").c_str(), "r");
    ASSERT_NE(out, nullptr);
    std::string text;
    char line[512];
    while (fgets(line, sizeof(line), out)) text += line;
    const int status = pclose(out);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 1) << flags;
    EXPECT_EQ(text, expected) << flags;
  }
}

}  // namespace
}  // namespace pstrain
