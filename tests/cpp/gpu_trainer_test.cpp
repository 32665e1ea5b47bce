// The trainer on the GPU engine against the CPU engine, from the same solver
// and the same real LMDB: the device update (worker/device_update.hpp) gives
// the CPU's weights and solver history within float tolerance for several
// rules (momentum and weight decay, Adam, Nesterov with clipping, iter_size
// 2); its snapshot's .caffemodel and .solverstate hold the device's values
// and resume to the uninterrupted run; and a GPU net with CPU-only layers
// (Data reading the LMDB, Accuracy in the test net) trains and tests as the
// CPU net does. Skipped without a CUDA device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "common/proto_io.hpp"
#include "tests/cpp/data_test_util.hpp"
#include "tests/cpp/gpu_test_util.hpp"
#include "tests/cpp/layer_test_util.hpp"
#include "tests/cpp/net_test_util.hpp"
#include "worker/trainer.hpp"

namespace pstrain::testing {
namespace {

constexpr float kTolerance = 2e-4f;

std::unique_ptr<Trainer> MakeTrainer(const std::string& solver, Engine engine,
                                     const std::string& resume_from = "",
                                     std::function<void(const TrainEvent&)> on_event = nullptr) {
  TrainerOptions options;
  options.engine = engine;
  options.resume_from = resume_from;
  options.on_event = std::move(on_event);
  auto trainer = Trainer::FromFile(solver, options);
  EXPECT_TRUE(trainer.ok()) << trainer.status().message();
  if (!trainer.ok()) return nullptr;
  EXPECT_EQ(trainer.value()->engine(), engine);
  return std::move(trainer).value();
}

std::vector<std::vector<float>> History(const std::string& solverstate) {
  caffe::SolverState state;
  const Status s = ReadBinaryProto(solverstate, &state);
  EXPECT_TRUE(s.ok()) << s.message();
  std::vector<std::vector<float>> history;
  for (const auto& blob : state.history())
    history.emplace_back(blob.data().begin(), blob.data().end());
  return history;
}

struct RuleCase {
  const char* name;
  const char* solver;
};

class GpuTrainerUpdateTest : public ::testing::TestWithParam<RuleCase> {};

TEST_P(GpuTrainerUpdateTest, MatchesCpuAndSnapshotsResume) {
  PSTRAIN_SKIP_WITHOUT_GPU();
  TempDir dir;
  const std::string solver =
      WriteLmdbClassifier(dir.path(), std::string(GetParam().solver) + "max_iter: 6\n");
  const std::string state3 = dir / "snap_iter_3.solverstate";
  const std::string model3 = dir / "snap_iter_3.caffemodel";

  // The CPU run: 3 steps, snapshot, 3 more.
  auto cpu = MakeTrainer(solver, Engine::kFast);
  ASSERT_NE(cpu, nullptr);
  ASSERT_TRUE(cpu->Step(3).ok());
  ASSERT_TRUE(cpu->Snapshot().ok());
  const auto cpu_history3 = History(state3);
  const auto cpu_model3 = CaffemodelBlobs(model3);
  ASSERT_TRUE(cpu->Step(3).ok());
  const auto cpu_final = ParamValues(cpu->net());
  ASSERT_FALSE(cpu_history3.empty());

  // The GPU run: the same snapshot and the same final weights.
  auto gpu = MakeTrainer(solver, Engine::kGpu);
  ASSERT_NE(gpu, nullptr);
  ASSERT_TRUE(gpu->Step(3).ok());
  auto written = gpu->Snapshot();
  ASSERT_TRUE(written.ok()) << written.status().message();
  EXPECT_EQ(written.value(), model3);
  ExpectAllNear(cpu_history3, History(state3), kTolerance, "history at iteration 3");
  ExpectAllNear(cpu_model3, CaffemodelBlobs(model3), kTolerance, "weights at iteration 3");
  ASSERT_TRUE(gpu->Step(3).ok());
  const auto gpu_final = ParamValues(gpu->net());
  ExpectAllNear(cpu_final, gpu_final, kTolerance, "weights at iteration 6");

  // Resumed on the GPU from the GPU's snapshot: the uninterrupted GPU run.
  auto resumed = MakeTrainer(solver, Engine::kGpu, state3);
  ASSERT_NE(resumed, nullptr);
  EXPECT_EQ(resumed->iter(), 3);
  ASSERT_TRUE(resumed->Step(3).ok());
  ExpectAllNear(gpu_final, ParamValues(resumed->net()), 1e-5f, "resumed weights at iteration 6");
}

INSTANTIATE_TEST_SUITE_P(
    Rules, GpuTrainerUpdateTest,
    ::testing::Values(RuleCase{"SgdMomentumDecay",
                               "base_lr: 0.1\nmomentum: 0.9\nweight_decay: 0.001\n"},
                      RuleCase{"AdamL1",
                               "type: \"Adam\"\nbase_lr: 0.01\nmomentum: 0.9\nmomentum2: 0.999\n"
                               "weight_decay: 0.001\nregularization_type: \"L1\"\n"},
                      RuleCase{"NesterovClipped",
                               "type: \"Nesterov\"\nbase_lr: 0.1\nmomentum: 0.9\n"
                               "clip_gradients: 0.05\n"},
                      RuleCase{"SgdIterSize2", "base_lr: 0.05\nmomentum: 0.5\niter_size: 2\n"}),
    [](const auto& info) { return std::string(info.param.name); });

// Data (a CPU-only layer reading a real LMDB) feeds GPU layers, and Accuracy
// (CPU-only) reads their output in the test net: losses at every iteration
// and the test results agree with the CPU engine's.
TEST(GpuTrainerTest, CpuOnlyLayersInAGpuNet) {
  PSTRAIN_SKIP_WITHOUT_GPU();
  TempDir dir;
  const std::string solver =
      WriteLmdbClassifier(dir.path(),
                          "base_lr: 0.2\nmomentum: 0.9\ndisplay: 1\nmax_iter: 8\n"
                          "test_iter: 4\ntest_interval: 4\nsnapshot_after_train: false\n");
  struct Seen {
    std::vector<float> train_loss;
    std::vector<std::vector<std::pair<std::string, double>>> tests;
  };
  auto record = [](Seen* seen) {
    return [seen](const TrainEvent& e) {
      if (e.kind == "test") seen->tests.push_back(e.values);
      if (e.kind != "train") return;
      for (const auto& [key, value] : e.values) {
        if (key == "loss") seen->train_loss.push_back(static_cast<float>(value));
      }
    };
  };
  Seen cpu_seen, gpu_seen;
  const auto initial = ParamValues(MakeTrainer(solver, Engine::kFast, "")->net());
  auto cpu = MakeTrainer(solver, Engine::kFast, "", record(&cpu_seen));
  auto gpu = MakeTrainer(solver, Engine::kGpu, "", record(&gpu_seen));
  ASSERT_NE(cpu, nullptr);
  ASSERT_NE(gpu, nullptr);
  ASSERT_NE(gpu->test_net(), nullptr);
  const Status cpu_done = cpu->Solve();
  ASSERT_TRUE(cpu_done.ok()) << cpu_done.message();
  const Status gpu_done = gpu->Solve();
  ASSERT_TRUE(gpu_done.ok()) << gpu_done.message();
  ASSERT_EQ(cpu_seen.train_loss.size(), 8u);
  ExpectNear(cpu_seen.train_loss, gpu_seen.train_loss, kTolerance, "train loss");
  // The weights moved: the GPU update did train (8 steps of a tiny net need not
  // lower the loss, and the CPU engine's losses above are the reference anyway).
  float moved = 0.0f;
  const auto trained = ParamValues(gpu->net());
  for (size_t b = 0; b < initial.size(); ++b) {
    for (size_t i = 0; i < initial[b].size(); ++i) {
      moved = std::max(moved, std::abs(trained[b][i] - initial[b][i]));
    }
  }
  EXPECT_GT(moved, 1e-3f);
  ASSERT_EQ(cpu_seen.tests.size(), 3u);  // iterations 0, 4 and 8
  ASSERT_EQ(gpu_seen.tests.size(), cpu_seen.tests.size());
  for (size_t t = 0; t < cpu_seen.tests.size(); ++t) {
    ASSERT_EQ(gpu_seen.tests[t].size(), cpu_seen.tests[t].size());
    for (size_t k = 0; k < cpu_seen.tests[t].size(); ++k) {
      EXPECT_EQ(gpu_seen.tests[t][k].first, cpu_seen.tests[t][k].first);
      EXPECT_NEAR(gpu_seen.tests[t][k].second, cpu_seen.tests[t][k].second, 1e-4)
          << "test " << t << " " << cpu_seen.tests[t][k].first;
    }
  }
  ExpectAllNear(ParamValues(cpu->net()), ParamValues(gpu->net()), kTolerance, "final weights");
}

}  // namespace
}  // namespace pstrain::testing
