// Tests of worker/trainer on tiny solvers: the SGD step against a hand-rolled
// loop, iter_size against a bigger batch, snapshot + resume against an
// uninterrupted run, TestAll averages, divergence, and solver errors.
#include "worker/trainer.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "common/proto_io.hpp"
#include "tests/cpp/data_test_util.hpp"
#include "tests/cpp/net_test_util.hpp"

namespace pstrain {
namespace {

using testing::ParamValues;
using testing::ParseNet;
using testing::ParseSolver;
using Params = std::vector<std::vector<float>>;

// |a - b| <= tol * max(1, |a|, |b|) element-wise.
void ExpectParamsNear(const Params& a, const Params& b, float tol, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].size(), b[i].size()) << what;
    for (size_t j = 0; j < a[i].size(); ++j) {
      const float scale = std::max({1.f, std::fabs(a[i][j]), std::fabs(b[i][j])});
      ASSERT_LE(std::fabs(a[i][j] - b[i][j]), tol * scale)
          << what << ": param " << i << "[" << j << "] " << a[i][j] << " vs " << b[i][j];
    }
  }
}

std::unique_ptr<Trainer> MakeTrainer(const std::string& solver_text, TrainerOptions options = {}) {
  auto trainer = Trainer::Create(ParseSolver(solver_text), "solver.prototxt", options);
  EXPECT_TRUE(trainer.ok()) << trainer.status().message();
  if (!trainer.ok()) return nullptr;
  return std::move(trainer).value();
}

std::string TrainerError(const std::string& solver_text) {
  auto trainer = Trainer::Create(ParseSolver(solver_text), "solver.prototxt", TrainerOptions());
  EXPECT_FALSE(trainer.ok());
  EXPECT_TRUE(trainer.ok() || trainer.status().IsInvalidArgument()) << trainer.status().ToString();
  return trainer.ok() ? "" : trainer.status().message();
}

// DummyData (gaussian data refilled every forward, drawn from the net seed;
// constant labels), an InnerProduct with lr/decay multipliers, softmax loss.
constexpr const char* kDummyNet = R"(
  layer { name: "data" type: "DummyData" top: "data" top: "label"
          dummy_data_param { shape { dim: 4 dim: 5 } shape { dim: 4 }
                             data_filler { type: "gaussian" std: 1 }
                             data_filler { type: "constant" value: 1 } } }
  layer { name: "ip" type: "InnerProduct" bottom: "data" top: "s"
          param { lr_mult: 1 decay_mult: 1 } param { lr_mult: 2 decay_mult: 0 }
          inner_product_param { num_output: 3 weight_filler { type: "gaussian" std: 0.3 }
                                bias_filler { type: "uniform" min: -0.2 max: 0.2 } } }
  layer { name: "loss" type: "SoftmaxWithLoss" bottom: "s" bottom: "label" top: "loss" }
)";

TEST(TrainerTest, SgdStepsMatchAHandRolledLoop) {
  const float base_lr = 0.1f, momentum = 0.9f, weight_decay = 0.01f, gamma = 0.5f;
  const int stepsize = 2, steps = 5;
  auto trainer = MakeTrainer(std::string(R"(
    type: "SGD" base_lr: 0.1 momentum: 0.9 weight_decay: 0.01
    lr_policy: "step" gamma: 0.5 stepsize: 2 max_iter: 5 random_seed: 7
    net_param {)") + kDummyNet +
                             "}");
  ASSERT_NE(trainer, nullptr);

  // The same net with the same seed: the same initial weights and data.
  NetOptions options;
  options.context.seed = 7;
  auto net = Net::Create(ParseNet(kDummyNet), options);
  ASSERT_TRUE(net.ok()) << net.status().message();
  Net& hand = *net.value();
  const Params initial = ParamValues(hand);
  ExpectParamsNear(ParamValues(trainer->net()), initial, 0.f, "initial weights");

  std::vector<std::vector<double>> history;
  for (const auto& p : hand.learnable_params()) history.emplace_back(p.blob->count(), 0.0);
  for (int it = 0; it < steps; ++it) {
    hand.ClearParamDiffs();
    hand.ForwardBackward();
    const double rate = base_lr * std::pow(gamma, it / stepsize);
    for (size_t i = 0; i < hand.learnable_params().size(); ++i) {
      const LearnableParam& p = hand.learnable_params()[i];
      float* w = p.blob->mutable_cpu_data();
      const float* g = p.blob->cpu_diff();
      for (int64_t j = 0; j < p.blob->count(); ++j) {
        const double grad = g[j] + weight_decay * p.decay_mult * w[j];
        history[i][j] = rate * p.lr_mult * grad + momentum * history[i][j];
        w[j] = static_cast<float>(w[j] - history[i][j]);
      }
    }
  }
  ASSERT_TRUE(trainer->Step(steps).ok());
  EXPECT_EQ(trainer->iter(), steps);
  ExpectParamsNear(ParamValues(trainer->net()), ParamValues(hand), 1e-5f, "after 5 steps");
  // The check is not vacuous: the weights moved well beyond the tolerance.
  EXPECT_GT(std::fabs(ParamValues(hand)[1][0] - initial[1][0]), 1e-2f);
}

std::string DataNet(const std::string& source, int batch) {
  return R"(
    layer { name: "data" type: "Data" top: "data" top: "label"
            data_param { source: ")" +
         source + "\" batch_size: " + std::to_string(batch) + R"( }
            transform_param { scale: 0.015625 } }
    layer { name: "ip" type: "InnerProduct" bottom: "data" top: "s"
            inner_product_param { num_output: 3 weight_filler { type: "gaussian" std: 0.3 } } }
    layer { name: "loss" type: "SoftmaxWithLoss" bottom: "s" bottom: "label" top: "loss" }
  )";
}

TEST(TrainerTest, IterSizeTwoEqualsDoubleBatch) {
  testing::TempDir dir;
  testing::WriteMixedLmdb(dir / "lmdb", 8);
  const std::string solver = R"(
    base_lr: 0.5 momentum: 0.9 lr_policy: "fixed" max_iter: 4 random_seed: 3 )";
  auto small = MakeTrainer(solver + "iter_size: 2 net_param {" + DataNet(dir / "lmdb", 2) + "}");
  auto big = MakeTrainer(solver + "net_param {" + DataNet(dir / "lmdb", 4) + "}");
  ASSERT_TRUE(small && big);
  const Params initial = ParamValues(big->net());
  ASSERT_TRUE(small->Step(4).ok());
  ASSERT_TRUE(big->Step(4).ok());
  ExpectParamsNear(ParamValues(small->net()), ParamValues(big->net()), 1e-6f, "iter_size 2");
  EXPECT_GT(std::fabs(ParamValues(big->net())[0][0] - initial[0][0]), 1e-3f);
}

TEST(TrainerTest, SnapshotAndResumeContinueExactly) {
  testing::TempDir dir;
  testing::WriteMixedLmdb(dir / "lmdb", 10);  // batch 3 (x iter_size 2): batches wrap around the end
  const std::string solver = R"(
    base_lr: 0.3 momentum: 0.9 lr_policy: "fixed" max_iter: 6 snapshot: 3 random_seed: 5
    iter_size: 2
    snapshot_prefix: ")" + (dir / "snaps/run") +
                             "\" net_param {" + DataNet(dir / "lmdb", 3) + "}";
  std::vector<std::string> snapshots;
  TrainerOptions options;
  options.on_event = [&](const TrainEvent& e) {
    if (e.kind == "snapshot") snapshots.push_back(e.text);
  };
  auto whole = MakeTrainer(solver, options);
  ASSERT_NE(whole, nullptr);
  ASSERT_TRUE(whole->Solve().ok());
  const Params final_weights = ParamValues(whole->net());
  EXPECT_EQ(snapshots, (std::vector<std::string>{dir / "snaps/run_iter_3.caffemodel",
                                                 dir / "snaps/run_iter_6.caffemodel"}));
  for (const char* f : {"run_iter_3.caffemodel", "run_iter_3.solverstate", "run_iter_6.caffemodel",
                        "run_iter_6.solverstate"}) {
    EXPECT_TRUE(FileExists(dir / (std::string("snaps/") + f))) << f;
  }
  caffe::SolverState state;
  ASSERT_TRUE(ReadBinaryProto(dir / "snaps/run_iter_3.solverstate", &state).ok());
  EXPECT_EQ(state.iter(), 3);
  EXPECT_EQ(state.history_size(), 2);  // SGD: one history blob per param

  TrainerOptions resume;
  resume.resume_from = dir / "snaps/run_iter_3.solverstate";
  auto resumed = MakeTrainer(solver, resume);
  ASSERT_NE(resumed, nullptr);
  EXPECT_EQ(resumed->iter(), 3);
  ASSERT_TRUE(resumed->Solve().ok());
  EXPECT_EQ(resumed->iter(), 6);
  ExpectParamsNear(ParamValues(resumed->net()), final_weights, 1e-6f, "resumed");

  // Control: the weights alone (no history, data from the start) end elsewhere.
  auto restarted = MakeTrainer(solver);
  ASSERT_NE(restarted, nullptr);
  ASSERT_TRUE(restarted->LoadWeights(dir / "snaps/run_iter_3.caffemodel").ok());
  ASSERT_TRUE(restarted->Step(3).ok());
  float max_diff = 0;
  const Params other = ParamValues(restarted->net());
  for (size_t i = 0; i < other.size(); ++i) {
    for (size_t j = 0; j < other[i].size(); ++j) {
      max_diff = std::max(max_diff, std::fabs(other[i][j] - final_weights[i][j]));
    }
  }
  EXPECT_GT(max_diff, 1e-4f);
}

TEST(TrainerTest, TestAllAveragesOverTestIter) {
  testing::TempDir dir;
  // Record i: one pixel of value i, labels 1 1 1 0 0 1.
  const int labels[6] = {1, 1, 1, 0, 0, 1};
  std::vector<std::pair<std::string, std::string>> records;
  for (int i = 0; i < 6; ++i) {
    records.emplace_back(
        "0000000" + std::to_string(i),
        testing::MakeDatum(1, 1, 1, std::string(1, static_cast<char>(i)), labels[i])
            .SerializeAsString());
  }
  testing::WriteLmdb(dir / "lmdb", records);
  std::vector<TrainEvent> events;
  TrainerOptions options;
  options.on_event = [&](const TrainEvent& e) { events.push_back(e); };
  auto trainer = MakeTrainer(R"(
    base_lr: 0.1 lr_policy: "fixed" max_iter: 1 test_iter: 3 test_interval: 100 random_seed: 1
    net_param {
      layer { name: "data" type: "Data" top: "data" top: "label"
              data_param { source: ")" +
                                 (dir / "lmdb") + R"(" batch_size: 2 } }
      layer { name: "ip" type: "InnerProduct" bottom: "data" top: "s"
              inner_product_param { num_output: 2 } }
      layer { name: "loss" type: "SoftmaxWithLoss" bottom: "s" bottom: "label" top: "loss" }
      layer { name: "accuracy" type: "Accuracy" bottom: "s" bottom: "label" top: "accuracy"
              include { phase: TEST } }
    })",
                             options);
  ASSERT_NE(trainer, nullptr);
  // Scores: s0 = x - 2.5, s1 = 0, so class 1 for x <= 2: right for records
  // 0 1 2 3 4 (batches: 1, 1, 1/2 right), wrong for 5.
  Layer* ip = trainer->net().layer_by_name("ip");
  float* w = ip->blobs()[0]->mutable_cpu_data();
  w[0] = 1.f;
  w[1] = 0.f;
  ip->blobs()[1]->mutable_cpu_data()[0] = -2.5f;
  ip->blobs()[1]->mutable_cpu_data()[1] = 0.f;
  double loss = 0;
  for (int i = 0; i < 6; ++i) {
    const double s0 = i - 2.5;
    const double log_sum = std::log(std::exp(s0) + 1.0);
    loss += log_sum - (labels[i] == 0 ? s0 : 0.0);
  }
  loss /= 6;
  for (int pass = 0; pass < 2; ++pass) {  // the test data restarts each pass
    auto results = trainer->TestAll();
    ASSERT_TRUE(results.ok()) << results.status().message();
    EXPECT_NEAR(results.value().at("accuracy"), 5.0 / 6.0, 1e-6);
    EXPECT_NEAR(results.value().at("loss"), loss, 1e-5);
  }
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].kind, "test");
  bool has_accuracy = false;
  for (const auto& [key, value] : events[0].values) {
    if (key == "accuracy") has_accuracy = std::fabs(value - 5.0 / 6.0) < 1e-6;
  }
  EXPECT_TRUE(has_accuracy);
}

TEST(TrainerTest, DivergingRunFails) {
  auto trainer = MakeTrainer(R"(
    base_lr: 1e20 lr_policy: "fixed" max_iter: 50 random_seed: 1
    net_param {
      layer { name: "data" type: "DummyData" top: "data" top: "target"
              dummy_data_param { shape { dim: 4 dim: 3 } shape { dim: 4 dim: 2 }
                                 data_filler { type: "gaussian" std: 1 } } }
      layer { name: "ip" type: "InnerProduct" bottom: "data" top: "y"
              inner_product_param { num_output: 2 weight_filler { type: "gaussian" std: 1 } } }
      layer { name: "loss" type: "EuclideanLoss" bottom: "y" bottom: "target" top: "loss" }
    })");
  ASSERT_NE(trainer, nullptr);
  Status s = trainer->Solve();
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(s.IsDiverged()) << s.ToString();
  const std::string& m = s.message();
  EXPECT_EQ(m.rfind("training diverged: the loss is ", 0), 0u) << m;
  const std::string tail = " (lower base_lr or check the data)";
  ASSERT_GT(m.size(), tail.size());
  EXPECT_EQ(m.substr(m.size() - tail.size()), tail) << m;
  EXPECT_LT(trainer->iter(), 50);
}

constexpr const char* kTinyNet = R"(
  layer { name: "data" type: "DummyData" top: "data" top: "label"
          dummy_data_param { shape { dim: 2 dim: 3 } shape { dim: 2 } } }
  layer { name: "ip" type: "InnerProduct" bottom: "data" top: "s"
          inner_product_param { num_output: 2 } }
  layer { name: "loss" type: "SoftmaxWithLoss" bottom: "s" bottom: "label" top: "loss" }
)";

TEST(TrainerTest, SolverErrors) {
  EXPECT_EQ(TrainerError(std::string("type: \"Foo\" base_lr: 0.1 net_param {") + kTinyNet + "}"),
            "solver.prototxt: type: unknown solver type \"Foo\"; known types: SGD, Nesterov, "
            "AdaGrad, RMSProp, AdaDelta, Adam");
  EXPECT_EQ(TrainerError("base_lr: 0.1 lr_policy: \"fixed\""),
            "solver.prototxt: give exactly one of net, net_param, train_net, train_net_param "
            "(found 0)");
  EXPECT_EQ(
      TrainerError(
          std::string(
              "base_lr: 0.1 lr_policy: \"fixed\" test_iter: 1 test_iter: 2 test_interval: 10 ") +
          "train_net_param {" + kTinyNet + "} test_net_param {" + kTinyNet + "}"),
      "solver.prototxt: test_iter must be given once per test net (1 test nets, 2 test_iter "
      "values)");
  auto missing = Trainer::FromFile("/nonexistent/solver.prototxt", TrainerOptions());
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(missing.status().IsNotFound());
  EXPECT_EQ(missing.status().message(),
            "/nonexistent/solver.prototxt: cannot open (No such file or directory)");
}

}  // namespace
}  // namespace pstrain
