// ElasticExchange (the worker's side of EASGD and local SGD) against a real
// elastic ShardLoop (bsp, two workers, tcp on 127.0.0.1, Run on a thread):
// model averaging leaves both workers on exactly the mean of their weights at
// every exchange (docs/config-reference.md, "Local SGD"), EASGD moves each
// worker by alpha * (x - c) and the center by the sum of those moves, each
// against hand-computed values. The values are multiples of 1/64, so every
// sum and half below is exact in float and the comparisons are exact.
#include "worker/ps/elastic_exchange.hpp"

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <thread>

#include "server/shard_loop.hpp"
#include "tests/cpp/shard_state_test_util.hpp"

namespace pstrain {
namespace {

using namespace std::chrono_literals;
using namespace server::test_support;  // NOLINT: the shard suites' net (w {2, 3}, b {2})

// One worker: its parameters' blobs, its client and its exchange.
struct ElasticWorker {
  Blob w, b;
  std::unique_ptr<PsClient> client;
  std::unique_ptr<ElasticExchange> exchange;
  std::vector<int64_t> center_versions;  // what on_center saw, in order

  std::vector<float> Values() const {
    std::vector<float> v(w.cpu_data(), w.cpu_data() + 6);
    v.insert(v.end(), b.cpu_data(), b.cpu_data() + 2);
    return v;
  }
  void SetValues(const std::vector<float>& v) {
    std::copy(v.begin(), v.begin() + 6, w.mutable_cpu_data());
    std::copy(v.begin() + 6, v.end(), b.mutable_cpu_data());
  }
};

constexpr uint64_t kJobKey = 43;

class ElasticExchangeTest : public ::testing::Test {
 protected:
  void TearDown() override {
    if (thread_.joinable()) {
      service_->Stop();
      thread_.join();
    }
  }

  // Starts the elastic shard, connects both workers (rank 0 sends kInitial),
  // pulls the center of clock 0 and tells each exchange it started there.
  void Start(ElasticOptions::Method method, float alpha) {
    server::ShardConfig config = Config(ConsistencyMode::kBsp, 2);
    config.methods.elastic = true;
    config.job_key = kJobKey;  // a shard without one refuses STATS
    server::ShardLoopOptions service_options;
    service_options.bind = "tcp://127.0.0.1:0";
    auto created = server::ShardLoop::Create(context_, server::ShardState(std::move(config)),
                                                service_options);
    ASSERT_TRUE(created.ok()) << created.status().message();
    service_ = std::move(created).value();
    thread_ = std::thread([this] { (void)service_->Run(); });
    ElasticOptions options;
    options.method = method;
    options.alpha = alpha;
    for (int rank = 0; rank < 2; ++rank) {
      ElasticWorker& worker = workers_[static_cast<size_t>(rank)];
      worker.w.Reshape({2, 3});
      worker.b.Reshape({2});
      worker.SetValues(kInitial);
      PsClientOptions o;
      o.servers = {service_->endpoint()};
      o.rank = rank;
      o.world_size = 2;
      o.mode = ConsistencyMode::kBsp;
      o.chunk_bytes = 16;
      o.timeout = 10s;
      o.job_key = kJobKey;
      auto client = PsClient::Connect(context_, o, {{"w", &worker.w}, {"b", &worker.b}});
      ASSERT_TRUE(client.ok()) << client.status().message();
      worker.client = std::move(client).value();
      worker.exchange = std::make_unique<ElasticExchange>(
          options, worker.client.get(), std::vector<Blob*>{&worker.w, &worker.b}, 2,
          [&worker](int64_t version, const std::vector<std::string>&) {
            worker.center_versions.push_back(version);
            return Status::Ok();
          });
      int64_t clock = -1;
      ASSERT_TRUE(worker.client->Hello(&clock).ok());
      ASSERT_EQ(clock, 0);
    }
    ASSERT_TRUE(workers_[0].client->InitPush().ok());
    for (ElasticWorker& worker : workers_) {
      worker.SetValues(std::vector<float>(kValues, 0.f));  // the pull must bring kInitial
      ASSERT_TRUE(worker.client->Pull(0).ok());
      int64_t version = -1;
      ASSERT_TRUE(worker.client->WaitPull(&version, nullptr).ok());
      ASSERT_EQ(version, 0);
      ASSERT_EQ(worker.Values(), kInitial);
      worker.exchange->Started();
    }
  }

  // Exchange `e` on both workers at once (a bsp exchange waits for both).
  void ExchangeBoth(int64_t e) {
    Status other;
    std::thread second([&] { other = workers_[1].exchange->Exchange(e); });
    const Status first = workers_[0].exchange->Exchange(e);
    second.join();
    ASSERT_TRUE(first.ok()) << first.message();
    ASSERT_TRUE(other.ok()) << other.message();
  }

  transport::Context context_;
  std::unique_ptr<server::ShardLoop> service_;
  std::thread thread_;
  std::array<ElasticWorker, 2> workers_;
};

// "Local training": worker `rank`'s weights after its period, as multiples of 1/64.
std::vector<float> Trained(int rank, int e) {
  std::vector<float> v(kValues);
  for (int i = 0; i < kValues; ++i) {
    v[static_cast<size_t>(i)] = kInitial[static_cast<size_t>(i)] +
                                static_cast<float>((rank + 1) * (i - 3) + 5 * e) / 64.f -
                                static_cast<float>(rank) * 0.75f;
  }
  return v;
}

TEST_F(ElasticExchangeTest, ModelAveragingLeavesEveryWorkerOnExactlyTheMean) {
  Start(ElasticOptions::Method::kAverage, 0.f);
  for (int e = 0; e < 3; ++e) {
    // Every exchange starts from the previous center, which each worker moved
    // away from by its own training.
    for (int rank = 0; rank < 2; ++rank) {
      std::vector<float> x = workers_[static_cast<size_t>(rank)].Values();
      const std::vector<float> step = Trained(rank, e);
      for (int i = 0; i < kValues; ++i) x[static_cast<size_t>(i)] += step[static_cast<size_t>(i)];
      workers_[static_cast<size_t>(rank)].SetValues(x);
    }
    const std::vector<float> x0 = workers_[0].Values(), x1 = workers_[1].Values();
    ExchangeBoth(e);
    for (int i = 0; i < kValues; ++i) {
      const size_t k = static_cast<size_t>(i);
      const double mean = (double{x0[k]} + double{x1[k]}) / 2;
      EXPECT_EQ(workers_[0].Values()[k], mean) << "exchange " << e << " value " << i;
      EXPECT_EQ(workers_[1].Values()[k], mean) << "exchange " << e << " value " << i;
    }
    // The center each worker trains on next is version e + 1.
    for (const ElasticWorker& worker : workers_) {
      ASSERT_EQ(worker.center_versions.size(), static_cast<size_t>(e + 1));
      EXPECT_EQ(worker.center_versions.back(), e + 1);
    }
  }
  auto stats = workers_[0].client->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status().message();
  EXPECT_EQ((*stats)[0].pushes_applied(), 2 * 3);  // one push a worker and exchange
}

TEST_F(ElasticExchangeTest, EasgdMovesEachWorkerAndTheCenterByAlphaTimesTheDistance) {
  const float alpha = 0.25f;
  Start(ElasticOptions::Method::kEasgd, alpha);
  std::vector<double> center(kInitial.begin(), kInitial.end());
  for (int e = 0; e < 2; ++e) {
    std::array<std::vector<float>, 2> x;
    for (int rank = 0; rank < 2; ++rank) {
      x[static_cast<size_t>(rank)] = Trained(rank, e);
      workers_[static_cast<size_t>(rank)].SetValues(x[static_cast<size_t>(rank)]);
    }
    // Exchange e pulls the center of clock e, which needs no other worker.
    for (int rank = 0; rank < 2; ++rank) {
      ASSERT_TRUE(workers_[static_cast<size_t>(rank)].exchange->Exchange(e).ok());
    }
    std::vector<double> next = center;
    for (int rank = 0; rank < 2; ++rank) {
      const ElasticWorker& worker = workers_[static_cast<size_t>(rank)];
      ASSERT_EQ(worker.center_versions.size(), static_cast<size_t>(e + 1));
      EXPECT_EQ(worker.center_versions.back(), e);
      for (int i = 0; i < kValues; ++i) {
        const size_t k = static_cast<size_t>(i);
        const double d = alpha * (double{x[static_cast<size_t>(rank)][k]} - center[k]);
        EXPECT_EQ(worker.Values()[k], x[static_cast<size_t>(rank)][k] - d)
            << "worker " << rank << " exchange " << e << " value " << i;
        next[k] += d;
      }
    }
    center = next;
  }
  // The servers' center after both exchanges: c + the sum of the workers' d, twice.
  ASSERT_TRUE(workers_[0].client->Pull(2).ok());
  int64_t version = -1;
  ASSERT_TRUE(workers_[0].client->WaitPull(&version, nullptr).ok());
  EXPECT_EQ(version, 2);
  for (int i = 0; i < kValues; ++i) {
    EXPECT_EQ(workers_[0].Values()[static_cast<size_t>(i)], center[static_cast<size_t>(i)])
        << "center value " << i;
  }
}

TEST(ElasticMethodTest, ParsesTheThreeNamesAndRefusesOthers) {
  EXPECT_EQ(ParseElasticMethod("none").value(), ElasticOptions::Method::kNone);
  EXPECT_EQ(ParseElasticMethod("easgd").value(), ElasticOptions::Method::kEasgd);
  EXPECT_EQ(ParseElasticMethod("average").value(), ElasticOptions::Method::kAverage);
  auto bad = ParseElasticMethod("local_sgd");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "\"local_sgd\" is not one of none, easgd, average");
}

}  // namespace
}  // namespace pstrain
