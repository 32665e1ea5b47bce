// GPU IPC pushes without a GPU (common/transport/gpu_path.hpp and its users):
//  - the decisions: which worker offers, which shard accepts, which path the
//    worker takes from the shards' answers (same host / another host / a CPU
//    shard / a shard from before GPU IPC), each with its exact reason;
//  - the IPC PUSH descriptors: Validate's shape checks and the slices against
//    the worker's region (bad offsets refused with exact messages);
//  - a real ShardLoop (tcp, 127.0.0.1) and PsClient: the HELLO_ACK answer, an
//    IPC push without an accepted offer refused with an ERROR and nothing
//    applied, transport.gpu_ipc true failing HELLO with the shard's reason,
//    and a refused offer leaving bsp bit for bit as without one (the socket
//    path). The GPU half is tests/cpp/gpu_ipc_test.cpp.
#include "common/transport/gpu_path.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <thread>

#include "common/transport/validate.hpp"
#include "server/shard_loop.hpp"
#include "tests/cpp/data_test_util.hpp"
#include "tests/cpp/gpu_test_util.hpp"
#include "tests/cpp/shard_state_test_util.hpp"
#include "tests/cpp/transport_test_util.hpp"
#include "worker/ps/ps_client.hpp"
#include "worker/ps/ps_worker.hpp"

namespace pstrain {
namespace {

using namespace std::chrono_literals;
using namespace server::test_support;  // NOLINT: the shard suites' net and gradients
using transport::GpuIpcSwitch;
using transport::GpuPathDecision;

transport::Context& context() {
  static transport::Context* c = new transport::Context();  // outlives every client
  return *c;
}

GpuIpcOffer Offer(const std::string& host_id, uint64_t region_bytes = 1024) {
  GpuIpcOffer offer;
  offer.set_host_id(host_id);
  offer.set_device("0000:3b:00.0");
  offer.set_mem_handle(std::string(64, '\0'));
  offer.set_event_handle(std::string(64, '\0'));
  offer.set_region_bytes(region_bytes);
  return offer;
}

transport::ShardGpuFacts GpuShard() {
  transport::ShardGpuFacts facts;
  facts.shard = 0;
  facts.host_id = "boot-a@node1";
  facts.device = 0;
  facts.mode = ConsistencyMode::kBsp;
  facts.cuda_build = true;
  return facts;
}

TEST(GpuPathTest, SwitchParsesItsThreeValuesAndNamesTheFlagOtherwise) {
  EXPECT_EQ(transport::ParseGpuIpcSwitch("auto").value(), GpuIpcSwitch::kAuto);
  EXPECT_EQ(transport::ParseGpuIpcSwitch("true").value(), GpuIpcSwitch::kOn);
  EXPECT_EQ(transport::ParseGpuIpcSwitch("false").value(), GpuIpcSwitch::kOff);
  EXPECT_EQ(transport::ParseGpuIpcSwitch("yes").status().message(),
            "--gpu-ipc 'yes' is not auto, true or false");
  EXPECT_STREQ(transport::GpuIpcSwitchName(GpuIpcSwitch::kOn), "true");
}

TEST(GpuPathTest, HostIdIsBootIdAtHostNameAndLocalHostIdIsStable) {
  EXPECT_EQ(transport::HostId("1234-abcd", "node7"), "1234-abcd@node7");
  const std::string here = transport::LocalHostId();
  EXPECT_EQ(here, transport::LocalHostId());
  EXPECT_NE(here.find('@'), std::string::npos) << here;
  EXPECT_NE(here.rfind("no-boot-id@", 0), 0u) << "this Linux has a boot id: " << here;
}

TEST(GpuPathTest, AWorkerOffersOnlyOnTheGpuEngineInBspWithPlainPushes) {
  transport::WorkerGpuFacts f;
  f.gpu_engine = true;
  f.cuda_build = true;
  EXPECT_EQ(transport::WorkerGpuIpcBlocker(f), "");
  auto with = [&](auto change) {
    transport::WorkerGpuFacts g = f;
    change(g);
    return transport::WorkerGpuIpcBlocker(g);
  };
  EXPECT_EQ(with([](auto& g) { g.gpu_ipc = GpuIpcSwitch::kOff; }), "transport.gpu_ipc is false");
  EXPECT_EQ(with([](auto& g) { g.cuda_build = false; }), "this build has no CUDA");
  EXPECT_EQ(with([](auto& g) { g.gpu_engine = false; }), "the worker runs on the CPU engine");
  EXPECT_EQ(with([](auto& g) { g.host_group = true; }), "bsp host aggregation sums on the host");
  EXPECT_EQ(with([](auto& g) { g.mode = ConsistencyMode::kSsp; }),
            "the worker runs ssp: GPU IPC pushes need bsp (the pull barrier orders the reuse "
            "of the worker's region)");
  EXPECT_EQ(with([](auto& g) { g.compression = FLOAT16; }),
            "FLOAT16 push compression encodes on the host");
  EXPECT_EQ(with([](auto& g) { g.elastic = true; }), "an elastic method pushes weight deltas");
}

TEST(GpuPathTest, AShardAcceptsAnOfferFromItsHostOnlyOnAGpuInBsp) {
  const transport::ShardGpuFacts gpu = GpuShard();
  EXPECT_EQ(transport::ShardGpuIpcBlocker(Offer("boot-a@node1"), gpu), "");
  EXPECT_EQ(transport::ShardGpuIpcBlocker(Offer("boot-b@node2"), gpu),
            "the worker is on host boot-b@node2, shard 0 on host boot-a@node1");
  // Same host name, another boot (or container): another host.
  EXPECT_EQ(transport::ShardGpuIpcBlocker(Offer("boot-z@node1"), gpu),
            "the worker is on host boot-z@node1, shard 0 on host boot-a@node1");
  transport::ShardGpuFacts f = gpu;
  f.device = -1;
  EXPECT_EQ(transport::ShardGpuIpcBlocker(Offer("boot-a@node1"), f),
            "shard 0 keeps its chunks on the CPU (--device cpu)");
  f = gpu;
  f.cuda_build = false;
  f.shard = 2;
  EXPECT_EQ(transport::ShardGpuIpcBlocker(Offer("boot-a@node1"), f), "shard 2's build has no CUDA");
  f = gpu;
  f.mode = ConsistencyMode::kAsp;
  EXPECT_EQ(transport::ShardGpuIpcBlocker(Offer("boot-a@node1"), f),
            "shard 0 runs asp: GPU IPC pushes need bsp (the pull barrier orders the reuse of "
            "the worker's region)");
  f = gpu;
  f.backup_workers = 1;
  EXPECT_EQ(transport::ShardGpuIpcBlocker(Offer("boot-a@node1"), f),
            "shard 0 runs bsp with 1 backup worker: a late push could be read after the worker "
            "reused its region");
  EXPECT_EQ(transport::ShardGpuIpcBlocker(Offer("boot-a@node1", 0), gpu),
            "the offer's region is empty");
}

TEST(GpuPathTest, GpuIpcTrueOnAWorkerThatCannotOfferFailsItsCreation) {
  testing::TempDir dir;
  PsWorkerOptions options;
  options.solver_path = testing::WriteLmdbClassifier(dir.path(), "base_lr: 0.1\nmax_iter: 2\n");
  options.client.servers = {"tcp://127.0.0.1:1"};  // never reached: Create fails first
  options.client.gpu_ipc = GpuIpcSwitch::kOn;
  auto worker = PsWorker::Create(context(), options);
  ASSERT_FALSE(worker.ok());
  EXPECT_TRUE(worker.status().IsFailedPrecondition());
#ifdef PSTRAIN_HAVE_CUDA
  EXPECT_EQ(worker.status().message(),
            "transport.gpu_ipc is true but the worker runs on the CPU engine");
#else
  EXPECT_EQ(worker.status().message(), "transport.gpu_ipc is true but this build has no CUDA");
#endif
  options.client.gpu_ipc = GpuIpcSwitch::kAuto;  // auto: the socket, silently on the CPU
  std::vector<std::string> notices;
  options.on_notice = [&](char, const std::string& text) { notices.push_back(text); };
  EXPECT_TRUE(PsWorker::Create(context(), options).ok());
  for (const std::string& n : notices) EXPECT_EQ(n.find("GPU IPC"), std::string::npos) << n;
}

GpuIpcAnswer Answer(bool accepted, const std::string& reason) {
  GpuIpcAnswer a;
  a.set_accepted(accepted);
  a.set_reason(reason);
  return a;
}

TEST(GpuPathTest, TheWorkerTakesIpcOnlyWhenEveryShardWithChunksAccepted) {
  const GpuIpcAnswer yes = Answer(true, "shard reads from gpu:0");
  const GpuIpcAnswer no = Answer(false, "shard 1 keeps its chunks on the CPU (--device cpu)");
  auto decide = [](GpuIpcSwitch s, std::vector<std::optional<GpuIpcAnswer>> answers,
                   std::vector<bool> holds) { return transport::DecideGpuPath(s, answers, holds); };
  Result<GpuPathDecision> all = decide(GpuIpcSwitch::kAuto, {yes, yes}, {true, true});
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(all->ipc);
  EXPECT_EQ(all->reason, "every shard with chunks accepted");

  Result<GpuPathDecision> refused = decide(GpuIpcSwitch::kAuto, {yes, no}, {true, true});
  ASSERT_TRUE(refused.ok());
  EXPECT_FALSE(refused->ipc);
  EXPECT_EQ(refused->reason,
            "server 1 refused GPU IPC pushes: shard 1 keeps its chunks on the CPU (--device cpu)");
  // A shard that holds none of this worker's chunks is never pushed to.
  Result<GpuPathDecision> idle = decide(GpuIpcSwitch::kAuto, {yes, no}, {true, false});
  ASSERT_TRUE(idle.ok());
  EXPECT_TRUE(idle->ipc);
  // A shard from before GPU IPC leaves the answer out.
  Result<GpuPathDecision> old = decide(GpuIpcSwitch::kAuto, {std::nullopt, yes}, {true, true});
  ASSERT_TRUE(old.ok());
  EXPECT_FALSE(old->ipc);
  EXPECT_EQ(old->reason, "server 0 does not know GPU IPC pushes (an older ps-server)");

  Result<GpuPathDecision> required = decide(GpuIpcSwitch::kOn, {yes, no}, {true, true});
  EXPECT_TRUE(required.status().IsFailedPrecondition());
  EXPECT_EQ(required.status().message(),
            "transport.gpu_ipc is true but server 1 refused GPU IPC pushes: shard 1 keeps its "
            "chunks on the CPU (--device cpu)");
  Result<GpuPathDecision> off = decide(GpuIpcSwitch::kOff, {yes, yes}, {true, true});
  ASSERT_TRUE(off.ok());
  EXPECT_FALSE(off->ipc);
  EXPECT_EQ(off->reason, "transport.gpu_ipc is false");
}

pstrain::Header IpcPush(const std::vector<std::pair<uint64_t, uint64_t>>& id_offset,
                        uint64_t length = 4) {
  pstrain::Header h = transport::PushHeader({WORKER, 2, 0}, 0, -1.0);
  for (const auto& [id, offset] : id_offset) {
    transport::AddChunk(h, static_cast<uint32_t>(id), length);
    h.add_ipc_offsets(offset);
  }
  return h;
}

TEST(GpuPathTest, IpcSlicesMustBeAlignedAndInsideTheRegion) {
  EXPECT_TRUE(transport::CheckIpcSlices(IpcPush({{0, 0}, {7, 16}}), 32).ok());
  EXPECT_TRUE(transport::CheckIpcSlices(IpcPush({{7, 16}}), 32).ok());  // ends exactly at the end
  EXPECT_EQ(transport::CheckIpcSlices(IpcPush({{0, 0}, {7, 6}}), 1024).message(),
            "chunk 7 at byte offset 6 is not 4-byte aligned");
  EXPECT_EQ(transport::CheckIpcSlices(IpcPush({{7, 20}}), 32).message(),
            "chunk 7's slice [20, 36) ends past the worker's 32-byte region");
  EXPECT_EQ(transport::CheckIpcSlices(IpcPush({{7, 4096}}, 1024), 6000).message(),
            "chunk 7's slice [4096, 8192) ends past the worker's 6000-byte region");
  // Offsets and lengths whose sum wraps around 2^64 are refused, not wrapped.
  EXPECT_EQ(transport::CheckIpcSlices(IpcPush({{7, UINT64_MAX - 3}}), 32).message(),
            "chunk 7's slice [18446744073709551612, past 2^64) ends past the worker's 32-byte "
            "region");
  EXPECT_EQ(transport::CheckIpcSlices(IpcPush({{7, 0}}, UINT64_MAX / 2), 32).message(),
            "chunk 7's slice [0, past 2^64) ends past the worker's 32-byte region");
}

transport::InMessage In(pstrain::Header header, size_t frames = 0) {
  transport::InMessage m;
  m.header = std::move(header);
  for (size_t i = 0; i < frames; ++i) m.frames.emplace_back(16);
  return m;
}

TEST(GpuPathTest, ValidateTakesAnIpcPushWithoutFramesAndRefusesMisshapenOnes) {
  transport::ValidationRules rules;
  rules.receiver = SERVER;
  EXPECT_TRUE(transport::Validate(In(IpcPush({{0, 0}, {1, 16}})), rules).ok());
  EXPECT_EQ(transport::Validate(In(IpcPush({{0, 0}, {1, 16}}), 2), rules).message(),
            "IPC push with 2 payload frames (its values are in the worker's region)");
  pstrain::Header fewer = IpcPush({{0, 0}, {1, 16}});
  fewer.mutable_ipc_offsets()->RemoveLast();
  EXPECT_EQ(transport::Validate(In(fewer), rules).message(),
            "IPC push lists 2 chunks and 1 ipc_offsets");
  pstrain::Header half = IpcPush({{0, 0}});
  half.set_dtype(FLOAT16);
  EXPECT_EQ(transport::Validate(In(half), rules).message(),
            "IPC push of FLOAT16 (its slices are float32)");
  pstrain::Header factors = IpcPush({{0, 0}});
  factors.mutable_factors()->set_samples(1);
  factors.mutable_factors()->set_row_begin(0);
  factors.mutable_factors()->set_row_end(1);
  factors.mutable_factors()->set_cols(4);
  EXPECT_EQ(transport::Validate(In(factors), rules).message(), "IPC push with factors");
  pstrain::Header reply = IpcPush({{0, 0}});
  reply.set_type(PULL_REPLY);
  reply.set_role(SERVER);
  reply.set_version(0);
  reply.set_reply_chunks_total(1);
  transport::ValidationRules worker_rules;
  worker_rules.receiver = WORKER;
  EXPECT_EQ(transport::Validate(In(reply), worker_rules).message(),
            "ipc_offsets in a PULL_REPLY (only a PUSH carries them)");
  pstrain::Header push = IpcPush({{0, 0}});
  *push.mutable_gpu_ipc_offer() = Offer("h");
  EXPECT_EQ(transport::Validate(In(push), rules).message(), "gpu_ipc_offer in a PUSH");
}

// A real shard loop (bsp, CPU chunks) and this process's clients.
class GpuPathShardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server::ShardConfig config = Config(ConsistencyMode::kBsp, 1);
    config.job_key = kJobKey;
    server::ShardLoopOptions options;
    options.bind = "tcp://127.0.0.1:0";
    options.drop_log_lines = 100;
    options.log = [this](const std::string& line) {
      std::lock_guard<std::mutex> lock(mutex_);
      logs_.push_back(line);
    };
    auto created = server::ShardLoop::Create(context_, server::ShardState(config), options);
    ASSERT_TRUE(created.ok()) << created.status().message();
    service_ = std::move(created).value();
    thread_ = std::thread([this] { (void)service_->Run(); });
  }
  void TearDown() override {
    service_->Stop();
    thread_.join();
  }

  // A client of worker 0 over blobs w (2x3) and b (2) set to kInitial.
  std::unique_ptr<PsClient> Client(std::optional<GpuIpcOffer> offer,
                                   GpuIpcSwitch gpu_ipc = GpuIpcSwitch::kAuto) {
    w_.Reshape({2, 3});
    b_.Reshape({2});
    std::memcpy(w_.mutable_cpu_data(), kInitial.data(), 6 * sizeof(float));
    std::memcpy(b_.mutable_cpu_data(), kInitial.data() + 6, 2 * sizeof(float));
    PsClientOptions o;
    o.servers = {service_->endpoint()};
    o.chunk_bytes = 16;
    o.job_key = kJobKey;
    o.timeout = 10s;
    o.gpu_ipc_offer = std::move(offer);
    o.gpu_ipc = gpu_ipc;
    auto client = PsClient::Connect(context_, o, {{"w", &w_}, {"b", &b_}});
    EXPECT_TRUE(client.ok()) << client.status().message();
    return client.ok() ? std::move(client).value() : nullptr;
  }

  // The refusal a CPU shard gives, by build.
  static std::string CpuShardRefusal() {
#ifdef PSTRAIN_HAVE_CUDA
    return "shard 0 keeps its chunks on the CPU (--device cpu)";
#else
    return "shard 0's build has no CUDA";
#endif
  }

  // Three bsp steps of RoughGrad (sums that depend on the order of addition)
  // through `client`; the weights after each step, as pulled.
  std::vector<std::vector<float>> Train(PsClient& client) {
    std::vector<std::vector<float>> seen;
    int64_t clock = -1;
    EXPECT_TRUE(client.Hello(&clock).ok());
    EXPECT_TRUE(client.InitPush().ok());
    for (int t = 0; t < 3; ++t) {
      EXPECT_TRUE(client.Pull(t).ok());
      int64_t version = -1;
      EXPECT_TRUE(client.WaitPull(&version, nullptr).ok());
      std::vector<float> weights(w_.cpu_data(), w_.cpu_data() + 6);
      weights.insert(weights.end(), b_.cpu_data(), b_.cpu_data() + 2);
      seen.push_back(weights);
      for (int i = 0; i < 6; ++i) w_.mutable_cpu_diff()[i] = RoughGrad(0, t, i);
      for (int i = 0; i < 2; ++i) b_.mutable_cpu_diff()[i] = RoughGrad(0, t, 6 + i);
      EXPECT_TRUE(client.Push({0, 1}, t, -1.0).ok());
    }
    EXPECT_TRUE(client.Flush().ok());
    return seen;
  }

  static constexpr uint64_t kJobKey = 77;
  transport::Context context_;
  std::unique_ptr<server::ShardLoop> service_;
  std::thread thread_;
  Blob w_, b_;
  std::mutex mutex_;  // guards logs_
  std::vector<std::string> logs_;
};

TEST_F(GpuPathShardTest, HelloAckAnswersAnOfferAndOnlyAnOffer) {
  auto dealer = transport::ConnectDealer(context_, service_->endpoint());
  ASSERT_TRUE(dealer.ok());
  transport::Channel& ch = *dealer.value();
  ASSERT_TRUE(ch.Send("", {transport::HelloHeader({WORKER, 0, kJobKey}, 1), {}}).ok());
  transport::InMessage plain = testing::MustReceive(ch);
  EXPECT_EQ(plain.header.type(), HELLO_ACK);
  EXPECT_FALSE(plain.header.has_gpu_ipc_answer());
  transport::OutMessage hello{transport::HelloHeader({WORKER, 0, kJobKey}, 1), {}};
  *hello.header.mutable_gpu_ipc_offer() = Offer(transport::LocalHostId());
  ASSERT_TRUE(ch.Send("", std::move(hello)).ok());
  transport::InMessage answered = testing::MustReceive(ch);
  ASSERT_TRUE(answered.header.has_gpu_ipc_answer()) << answered.header.ShortDebugString();
  EXPECT_FALSE(answered.header.gpu_ipc_answer().accepted());
  EXPECT_EQ(answered.header.gpu_ipc_answer().reason(), CpuShardRefusal());
  std::lock_guard<std::mutex> lock(mutex_);
  EXPECT_NE(std::find(logs_.begin(), logs_.end(),
                      "worker 0's GPU IPC offer refused: " + CpuShardRefusal()),
            logs_.end());
}

TEST_F(GpuPathShardTest, AnIpcPushWithoutAnAcceptedOfferGetsAnErrorAndNothingIsApplied) {
  auto dealer = transport::ConnectDealer(context_, service_->endpoint());
  ASSERT_TRUE(dealer.ok());
  transport::Channel& ch = *dealer.value();
  ASSERT_TRUE(ch.Send("", {transport::HelloHeader({WORKER, 0, kJobKey}, 1), {}}).ok());
  ASSERT_EQ(testing::MustReceive(ch).header.type(), HELLO_ACK);
  transport::OutMessage init{transport::NewHeader({WORKER, 0, kJobKey}, INIT_PUSH), {}};
  for (const auto& p : Params()) *init.header.add_params() = p;
  for (uint32_t id : {0u, 1u, 2u}) {
    auto values = std::make_shared<std::vector<float>>(kInitial.begin() + Offset(id),
                                                       kInitial.begin() + Offset(id) + Length(id));
    transport::AddChunk(init.header, id, values->size());
    init.payloads.push_back(transport::Payload::Of(values));
  }
  ASSERT_TRUE(ch.Send("", std::move(init)).ok());
  ASSERT_EQ(testing::MustReceive(ch).header.type(), INIT_ACK);
  pstrain::Header push = transport::PushHeader({WORKER, 0, kJobKey}, 0, -1.0);
  for (uint32_t id : {0u, 1u, 2u}) {
    transport::AddChunk(push, id, static_cast<uint64_t>(Length(id)));
    push.add_ipc_offsets(static_cast<uint64_t>(Offset(id)) * 4);
  }
  ASSERT_TRUE(ch.Send("", {push, {}}).ok());
  transport::InMessage error = testing::MustReceive(ch);
  EXPECT_EQ(error.header.type(), ERROR);
  EXPECT_EQ(error.header.text(),
            "IPC push of worker 0 refused: worker 0 pushed through GPU IPC without an accepted "
            "offer");
  ASSERT_TRUE(ch.Send("", {transport::NewHeader({WORKER, 0, kJobKey}, STATS), {}}).ok());
  transport::InMessage stats = testing::MustReceive(ch);
  EXPECT_EQ(stats.header.stats().bad_messages(), 1);
  EXPECT_EQ(stats.header.stats().pushes_applied(), 0);
  EXPECT_EQ(stats.header.stats().gpu_ipc_pushes(), 0);
  EXPECT_EQ(stats.header.stats().worker_clocks(0), 0);  // the push did not count
}

TEST_F(GpuPathShardTest, GpuIpcTrueFailsHelloWithTheShardsReason) {
  std::unique_ptr<PsClient> client = Client(Offer(transport::LocalHostId()), GpuIpcSwitch::kOn);
  ASSERT_NE(client, nullptr);
  int64_t clock = -1;
  const Status s = client->Hello(&clock);
  EXPECT_TRUE(s.IsFailedPrecondition());
  EXPECT_EQ(s.message(),
            "transport.gpu_ipc is true but server 0 refused GPU IPC pushes: " + CpuShardRefusal());
}

TEST_F(GpuPathShardTest, ARefusedOfferLeavesBspBitForBitAsWithoutOne) {
  std::unique_ptr<PsClient> plain = Client(std::nullopt);
  ASSERT_NE(plain, nullptr);
  const std::vector<std::vector<float>> socket = Train(*plain);
  EXPECT_FALSE(plain->gpu_path().ipc);
  ASSERT_TRUE(plain->Shutdown().ok());
  thread_.join();
  // A fresh shard for the second run.
  SetUp();
  std::unique_ptr<PsClient> offered = Client(Offer(transport::LocalHostId()));
  ASSERT_NE(offered, nullptr);
  const std::vector<std::vector<float>> fallback = Train(*offered);
  EXPECT_FALSE(offered->gpu_path().ipc);
  EXPECT_EQ(offered->gpu_path().reason, "server 0 refused GPU IPC pushes: " + CpuShardRefusal());
  EXPECT_EQ(offered->traffic().gpu_ipc_pushes, 0);
  const Status ipc = offered->PushIpc({0}, 3, {0, 256});
  EXPECT_TRUE(ipc.IsFailedPrecondition());
  EXPECT_EQ(ipc.message(),
            "PushIpc, but pushes go through the socket: server 0 refused GPU IPC "
            "pushes: " +
                CpuShardRefusal());
  ASSERT_EQ(socket.size(), 3u);
  ASSERT_EQ(fallback.size(), 3u);
  for (size_t t = 0; t < 3; ++t) {
    EXPECT_EQ(std::memcmp(socket[t].data(), fallback[t].data(), 8 * sizeof(float)), 0)
        << "weights of step " << t;
  }
  EXPECT_NE(socket[2], socket[0]);  // the steps moved the weights
}

}  // namespace
}  // namespace pstrain
