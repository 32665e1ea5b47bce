// The real ps-server program under bad input: garbage frames, a stranger's job
// key, a malformed push — each dropped, logged and counted in STATS and in the
// last line, no weight changed — and a clean exit on SHUTDOWN. Every wait is
// bounded; the process is killed in TearDown if it is still there.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "common/transport/channel.hpp"
#include "program_path.hpp"

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
    int out[2];
    ASSERT_EQ(pipe(out), 0);
    pid_ = fork();
    ASSERT_GE(pid_, 0);
    if (pid_ == 0) {
      dup2(out[1], 1);
      close(out[0]);
      const std::string bin = ProgramPath("ps-server");
      const std::string solver = (dir_ / "solver.prototxt").string();
      execl(bin.c_str(), bin.c_str(), "--solver", solver.c_str(), "--workers", "1", "--json",
            "--job-key", std::to_string(kJobKey).c_str(), "--idle-exit-s", "30",
            static_cast<char*>(nullptr));
      _exit(127);
    }
    close(out[1]);
    stdout_ = fdopen(out[0], "r");
    char line[512] = {0};
    ASSERT_NE(fgets(line, sizeof(line), stdout_), nullptr) << "ps-server printed nothing";
    const std::string text = line;
    const size_t at = text.find("\"endpoint\":\"");
    ASSERT_NE(at, std::string::npos) << text;
    endpoint_ = text.substr(at + 12, text.find('"', at + 12) - at - 12);
    auto dealer = transport::ConnectDealer(context_, endpoint_);
    ASSERT_TRUE(dealer.ok()) << dealer.status().message();
    channel_ = std::move(dealer).value();
  }

  void TearDown() override {
    channel_.reset();
    if (pid_ > 0 && waitpid(pid_, nullptr, WNOHANG) == 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (stdout_) fclose(stdout_);
    std::filesystem::remove_all(dir_);
  }

  pstrain::Header Header(pstrain::MessageType type, uint64_t key = kJobKey) {
    pstrain::Header h;
    h.set_type(type);
    h.set_role(pstrain::WORKER);
    h.set_sender(0);
    h.set_job_key(key);
    return h;
  }

  std::optional<InMessage> Expect(pstrain::MessageType type) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      auto got = channel_->Receive(std::chrono::milliseconds(200));
      EXPECT_TRUE(got.ok()) << got.status().message();
      if (!got.ok()) return std::nullopt;
      if (got.value().has_value()) {
        EXPECT_EQ(got.value()->header.type(), type) << got.value()->header.ShortDebugString();
        return std::move(got.value());
      }
    }
    ADD_FAILURE() << "no " << pstrain::MessageType_Name(type) << " within 10 s";
    return std::nullopt;
  }

  std::filesystem::path dir_;
  pid_t pid_ = -1;
  FILE* stdout_ = nullptr;
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

  auto weights = std::make_shared<std::vector<float>>(std::vector<float>{1, 2, 3, 4});
  OutMessage init{Header(pstrain::INIT_PUSH), {}};
  auto* meta = init.header.add_params();
  meta->set_name("w");
  meta->add_shape(4);
  auto* ref = init.header.add_chunks();
  ref->set_id(0);
  ref->set_length(4);
  init.payloads.push_back(Payload::Of(weights));
  ASSERT_TRUE(channel_->Send("", std::move(init)).ok());
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
  int status = 0;
  for (int i = 0; i < 100 && waitpid(pid_, &status, WNOHANG) == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(WIFEXITED(status)) << "ps-server did not exit after SHUTDOWN";
  EXPECT_EQ(WEXITSTATUS(status), 0);
  pid_ = -1;
  // Its last line: each field once, the same counts as STATS.
  std::string all, done;
  char line[2048];
  while (fgets(line, sizeof(line), stdout_)) {
    all += line;
    if (std::string(line).find("\"event\":\"done\"") != std::string::npos) done = line;
  }
  ASSERT_FALSE(done.empty()) << all;
  EXPECT_EQ(JsonField(done, "bad_messages"), std::to_string(kGarbage + 2)) << done;
  EXPECT_EQ(JsonField(done, "pushes_applied"), "1") << done;
  EXPECT_EQ(JsonField(done, "staleness_histogram"), "[1]") << done;
  EXPECT_EQ(JsonField(done, "version"), "1") << done;
  EXPECT_EQ(JsonField(done, "staleness_max"), "0") << done;
  // Each drop was logged with its reason.
  EXPECT_NE(all.find("dropped HELLO from worker 0"), std::string::npos) << all;
  EXPECT_NE(all.find("job key mismatch"), std::string::npos) << all;
  EXPECT_NE(all.find("chunk 0: header says 2 values, the chunk has 4"), std::string::npos) << all;
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

}  // namespace
}  // namespace pstrain
