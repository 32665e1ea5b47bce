// Tests of the one training loop's hooks (Trainer::Callback, TrainerOptions)
// and of what its train events report: the order the hooks run in, that each
// layer's gradient is final when AfterBackward names it, that the loop leaves
// the weights to a callback when told, Caffe's smoothed loss, and the rates.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "tests/cpp/net_test_util.hpp"
#include "worker/train_event.hpp"
#include "worker/trainer.hpp"

namespace pstrain {
namespace {

using testing::ParamValues;
using testing::ParseSolver;

// DummyData (batch 4, gaussian data redrawn every forward), an InnerProduct,
// softmax loss: layers 0 data, 1 ip, 2 loss.
constexpr const char* kNet = R"(
  layer { name: "data" type: "DummyData" top: "data" top: "label"
          dummy_data_param { shape { dim: 4 dim: 5 } shape { dim: 4 }
                             data_filler { type: "gaussian" std: 1 }
                             data_filler { type: "constant" value: 1 } } }
  layer { name: "ip" type: "InnerProduct" bottom: "data" top: "s"
          inner_product_param { num_output: 3 weight_filler { type: "gaussian" std: 0.3 } } }
  layer { name: "loss" type: "SoftmaxWithLoss" bottom: "s" bottom: "label" top: "loss" }
)";

std::unique_ptr<Trainer> MakeTrainer(const std::string& solver_fields, TrainerOptions options) {
  auto trainer =
      Trainer::Create(ParseSolver(solver_fields + " random_seed: 7 net_param {" + kNet + "}"),
                      "solver.prototxt", options);
  EXPECT_TRUE(trainer.ok()) << trainer.status().message();
  return trainer.ok() ? std::move(trainer).value() : nullptr;
}

double Value(const TrainEvent& e, const std::string& key) {
  for (const auto& [k, v] : e.values) {
    if (k == key) return v;
  }
  ADD_FAILURE() << e.kind << "@" << e.iter << " has no " << key;
  return NAN;
}

// Writes down every hook call, and the ip weight gradient when it is named
// final and when the whole iteration's gradients are ready.
class Recorder : public Trainer::Callback {
 public:
  explicit Recorder(Trainer* trainer) : trainer_(trainer) {}
  Status OnStart(int iter) override { return Log("start@" + std::to_string(iter)); }
  Status OnLastForward(int iter) override { return Log("last_forward@" + std::to_string(iter)); }
  Status AfterBackward(int iter, int layer) override {
    if (layer == 1) ip_grad_at_backward = IpGrad();
    return Log("backward@" + std::to_string(iter) + ":" + std::to_string(layer));
  }
  Status OnGradientsReady(int iter) override {
    ip_grad_at_ready = IpGrad();
    return Log("ready@" + std::to_string(iter));
  }
  void OnEvent(TrainEvent* event) override {
    calls.push_back("event " + event->kind + "@" + std::to_string(event->iter));
    event->values.push_back({"added", 1.0});
  }
  Status OnFinish(int iter) override { return Log("finish@" + std::to_string(iter)); }

  std::vector<std::string> calls;
  std::vector<float> ip_grad_at_backward, ip_grad_at_ready;
  std::string fail_at;  // a call that returns an error

 private:
  Status Log(const std::string& call) {
    calls.push_back(call);
    return call == fail_at ? Status::Unavailable("hook failed at " + call) : Status::Ok();
  }
  std::vector<float> IpGrad() const {
    const Blob* w = trainer_->net().layer_by_name("ip")->blobs()[0].get();
    return std::vector<float>(w->cpu_diff(), w->cpu_diff() + w->count());
  }
  Trainer* trainer_;
};

TEST(TrainerLoopTest, HooksRunInCaffesOrder) {
  std::vector<std::string> emitted;
  TrainerOptions options;
  options.on_event = [&](const TrainEvent& e) {
    emitted.push_back(e.kind + "@" + std::to_string(e.iter));
    if (e.kind == "train" || e.kind == "done") {
      EXPECT_EQ(Value(e, "added"), 1.0);
    }
  };
  options.write_snapshots = false;
  auto trainer =
      MakeTrainer("base_lr: 0.1 lr_policy: \"fixed\" max_iter: 2 display: 2 iter_size: 2", options);
  ASSERT_NE(trainer, nullptr);
  Recorder recorder(trainer.get());
  trainer->add_callback(&recorder);
  ASSERT_TRUE(trainer->Solve().ok());
  // Per iteration: start, two passes of which only the last is hooked (its
  // layers from the top down), display every 2nd, then the gradients.
  EXPECT_EQ(recorder.calls,
            (std::vector<std::string>{"start@0", "last_forward@0", "backward@0:2", "backward@0:1",
                                      "backward@0:0", "event train@0", "ready@0", "start@1",
                                      "last_forward@1", "backward@1:2", "backward@1:1",
                                      "backward@1:0", "ready@1", "finish@2", "event done@2"}));
  EXPECT_EQ(emitted, (std::vector<std::string>{"train@0", "done@2"}));
  // The ip gradient named final after layer 1's backward is the iteration's.
  ASSERT_EQ(recorder.ip_grad_at_backward.size(), 15u);
  EXPECT_EQ(recorder.ip_grad_at_backward, recorder.ip_grad_at_ready);
  float norm = 0;
  for (float g : recorder.ip_grad_at_ready) norm += std::fabs(g);
  EXPECT_GT(norm, 1e-3f);
}

TEST(TrainerLoopTest, AHookErrorStopsTheLoopWithIt) {
  for (const std::string fail_at : {"start@1", "backward@1:1", "ready@0", "finish@2"}) {
    SCOPED_TRACE(fail_at);
    auto trainer = MakeTrainer("base_lr: 0.1 lr_policy: \"fixed\" max_iter: 2", TrainerOptions());
    ASSERT_NE(trainer, nullptr);
    Recorder recorder(trainer.get());
    recorder.fail_at = fail_at;
    trainer->add_callback(&recorder);
    const Status s = trainer->Solve();
    EXPECT_TRUE(s.IsUnavailable()) << s.ToString();
    EXPECT_EQ(s.message(), "hook failed at " + fail_at);
    // No hook runs after the failing one (after a failing AfterBackward the
    // pass still ends, unhooked).
    EXPECT_EQ(recorder.calls.back(), fail_at);
  }
}

TEST(TrainerLoopTest, WithoutLocalUpdatesTheCallbackOwnsTheWeights) {
  TrainerOptions options;
  options.apply_updates = false;
  auto frozen = MakeTrainer("base_lr: 0.1 lr_policy: \"fixed\" max_iter: 3", options);
  auto trained = MakeTrainer("base_lr: 0.1 lr_policy: \"fixed\" max_iter: 3", TrainerOptions());
  ASSERT_TRUE(frozen && trained);
  const auto initial = ParamValues(frozen->net());
  ASSERT_EQ(ParamValues(trained->net()), initial);  // same seed, same start
  ASSERT_TRUE(frozen->Step(3).ok());
  ASSERT_TRUE(trained->Step(3).ok());
  EXPECT_EQ(frozen->iter(), 3);
  EXPECT_EQ(ParamValues(frozen->net()), initial);
  EXPECT_NE(ParamValues(trained->net()), initial);
}

TEST(TrainerLoopTest, StartAtContinuesTheCount) {
  std::vector<int> displayed;
  TrainerOptions options;
  options.on_event = [&](const TrainEvent& e) {
    if (e.kind == "train") displayed.push_back(e.iter);
  };
  options.write_snapshots = false;
  auto trainer = MakeTrainer("base_lr: 0.1 lr_policy: \"fixed\" max_iter: 9 display: 3", options);
  ASSERT_NE(trainer, nullptr);
  trainer->StartAt(5);
  ASSERT_TRUE(trainer->Solve().ok());
  EXPECT_EQ(trainer->iter(), 9);
  EXPECT_EQ(displayed, (std::vector<int>{6}));
}

TEST(SmoothedLossTest, MeanOfTheLastWindowLosses) {
  SmoothedLoss loss(3);
  const float losses[] = {1, 2, 3, 4, 5, 10};
  const double expected[] = {1, 1.5, 2, 3, 4, 19.0 / 3};
  for (int i = 0; i < 6; ++i) {
    loss.Add(losses[i]);
    EXPECT_NEAR(loss.value(), expected[i], 1e-12) << i;
  }
  SmoothedLoss one(0);  // average_loss < 1 counts as 1: the last loss
  one.Add(2.5f);
  one.Add(7.f);
  EXPECT_EQ(one.value(), 7.0);
}

// The train events' loss is Caffe's: the mean over the last average_loss
// iterations (here against the same run's per-iteration losses), and they
// report both rates, images = iterations x batch x iter_size.
TEST(TrainerLoopTest, TrainEventsSmoothTheLossAsCaffeAndReportBothRates) {
  std::vector<double> per_iteration, smoothed;
  std::vector<TrainEvent> events;
  TrainerOptions each;
  each.on_event = [&](const TrainEvent& e) {
    if (e.kind == "train") per_iteration.push_back(Value(e, "loss"));
  };
  TrainerOptions averaged;
  averaged.on_event = [&](const TrainEvent& e) {
    if (e.kind == "train") events.push_back(e);
  };
  const std::string solver = "base_lr: 0.2 lr_policy: \"fixed\" max_iter: 7 iter_size: 2 ";
  auto a = MakeTrainer(solver + "display: 1", each);
  auto b = MakeTrainer(solver + "display: 2 average_loss: 3", averaged);
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(a->Step(7).ok());
  ASSERT_TRUE(b->Step(7).ok());
  ASSERT_EQ(per_iteration.size(), 7u);
  ASSERT_EQ(events.size(), 4u);  // iterations 0, 2, 4, 6
  for (const TrainEvent& e : events) {
    const int first = std::max(0, e.iter - 2);
    double mean = 0;
    for (int i = first; i <= e.iter; ++i) mean += per_iteration[i];
    mean /= e.iter - first + 1;
    EXPECT_NEAR(Value(e, "loss"), mean, 1e-6) << "iteration " << e.iter;
    EXPECT_NEAR(Value(e, "lr"), 0.2, 1e-7);
    const double iters = Value(e, "iters_per_second");
    EXPECT_GT(iters, 0);
    EXPECT_NEAR(Value(e, "images_per_second"), iters * 4 * 2, 1e-9 * iters);
  }
  EXPECT_EQ(b->net().batch_size(), 4);
}

// Caffe's Solve ends with one more forward of the train net, with the final
// weights, when `display` divides max_iter, and prints its (smoothed) loss as
// "Iteration N, loss = ..."; otherwise no such line.
TEST(TrainerLoopTest, TheDoneLossIsCaffesExtraForwardWithTheFinalWeights) {
  const std::string net = R"( random_seed: 7 net_param {
    layer { name: "data" type: "DummyData" top: "data" top: "label"
            dummy_data_param { shape { dim: 4 dim: 5 } shape { dim: 4 }
                               data_filler { type: "constant" value: 0.5 }
                               data_filler { type: "constant" value: 1 } } }
    layer { name: "ip" type: "InnerProduct" bottom: "data" top: "s"
            inner_product_param { num_output: 3 weight_filler { type: "gaussian" std: 0.3 } } }
    layer { name: "loss" type: "SoftmaxWithLoss" bottom: "s" bottom: "label" top: "loss" } })";
  for (const int display : {3, 4}) {
    SCOPED_TRACE(display);
    std::vector<TrainEvent> done;
    TrainerOptions options;
    options.write_snapshots = false;
    options.on_event = [&](const TrainEvent& e) {
      if (e.kind == "done") done.push_back(e);
    };
    auto trainer = Trainer::Create(
        ParseSolver("base_lr: 0.5 lr_policy: \"fixed\" max_iter: 6 display: " +
                    std::to_string(display) + net),
        "solver.prototxt", options);
    ASSERT_TRUE(trainer.ok()) << trainer.status().message();
    ASSERT_TRUE(trainer.value()->Solve().ok());
    ASSERT_EQ(done.size(), 1u);
    const bool has_loss = std::any_of(done[0].values.begin(), done[0].values.end(),
                                      [](const auto& kv) { return kv.first == "loss"; });
    if (display == 4) {  // 6 % 4 != 0: no extra forward, no loss line
      EXPECT_FALSE(has_loss);
      continue;
    }
    // The data is the same every pass: a forward now is the extra forward
    // (iteration 5's own loss, before its update, differs from it).
    const float final_loss = trainer.value()->net().Forward();
    EXPECT_FLOAT_EQ(static_cast<float>(Value(done[0], "loss")), final_loss);
  }
}

}  // namespace
}  // namespace pstrain
