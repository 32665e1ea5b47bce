// Tests of common/optim: every update rule against Caffe's formulas evaluated
// in double, slice equivalence (bit-identical), lr policies, gradient
// clipping, validation messages and reading a SolverParameter.
#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "common/optim/lr_policy.hpp"
#include "common/optim/solver_hyper.hpp"
#include "common/optim/solver_proto.hpp"
#include "common/optim/update_rule.hpp"
#include "proto/caffe.pb.h"

namespace pstrain::optim {
namespace {

using Vec = std::vector<double>;

// One solver's state in double: weights and history arrays.
struct RefState {
  Vec data;
  std::vector<Vec> hist;
};

// Caffe's step in double, written independently of the rules under test.
void RefStep(const SolverHyper& hy, const ParamHyper& ph, const StepInputs& in, Vec diff,
             RefState* st) {
  const double local_decay = double{hy.weight_decay} * ph.decay_mult;
  const double lr = double{in.rate} * ph.lr_mult;
  const double mom = hy.momentum, delta = hy.delta;
  for (size_t i = 0; i < diff.size(); ++i) {
    double g = diff[i] * in.grad_scale;
    const double w = st->data[i];
    if (hy.regularization == Regularization::kL2) {
      g += local_decay * w;
    } else {
      g += local_decay * ((w > 0) - (w < 0));
    }
    double& h0 = st->hist[0][i];
    double update = 0;
    if (hy.type == "SGD") {
      h0 = mom * h0 + lr * g;
      update = h0;
    } else if (hy.type == "Nesterov") {
      const double old = h0;
      h0 = mom * h0 + lr * g;
      update = (1 + mom) * h0 - mom * old;
    } else if (hy.type == "AdaGrad") {
      h0 += g * g;
      update = lr * g / (std::sqrt(h0) + delta);
    } else if (hy.type == "RMSProp") {
      h0 = hy.rms_decay * h0 + (1 - double{hy.rms_decay}) * g * g;
      update = lr * g / (std::sqrt(h0) + delta);
    } else if (hy.type == "AdaDelta") {
      double& h1 = st->hist[1][i];
      h0 = mom * h0 + (1 - mom) * g * g;
      const double u = g * std::sqrt((h1 + delta) / (h0 + delta));
      h1 = mom * h1 + (1 - mom) * u * u;
      update = lr * u;
    } else if (hy.type == "Adam") {
      double& v = st->hist[1][i];
      const double b1 = hy.momentum, b2 = hy.momentum2;
      const int t = in.iter + 1;
      h0 = b1 * h0 + (1 - b1) * g;
      v = b2 * v + (1 - b2) * g * g;
      const double m_hat = h0 / (1 - std::pow(b1, t));
      const double v_hat = v / (1 - std::pow(b2, t));
      // Caffe's eps sits outside the bias-corrected root: eps_hat scaled.
      update = lr * m_hat / (std::sqrt(v_hat) + delta / std::sqrt(1 - std::pow(b2, t)));
    }
    st->data[i] = w - update;
  }
}

// The float state a rule works on.
struct FloatState {
  std::vector<float> data;
  std::vector<std::vector<float>> hist;
  std::vector<float*> hist_ptrs;
  FloatState(const Vec& d, int slots) : data(d.begin(), d.end()) {
    hist.assign(slots, std::vector<float>(d.size(), 0.f));
    for (auto& h : hist) hist_ptrs.push_back(h.data());
  }
  // The slice [begin, begin + n) of everything; `diff` points at the full diff.
  ParamSlice Slice(float* diff, size_t begin, size_t n) {
    slice_ptrs.clear();
    for (float* h : hist_ptrs) slice_ptrs.push_back(h + begin);
    return ParamSlice{data.data() + begin, diff + begin, slice_ptrs, n};
  }
  std::vector<float*> slice_ptrs;
};

const std::vector<Vec> kGrads = {{0.5, -0.25, 0.125}, {-0.4, 0.3, 0.02}, {0.1, 0.6, -0.75}};
const Vec kData = {1.0, -2.0, 0.0};  // includes 0 for L1's sign(0) = 0

SolverHyper Hyper(const std::string& type, Regularization reg) {
  SolverHyper h;
  h.type = type;
  h.base_lr = 0.1f;
  h.lr_policy = "fixed";
  h.weight_decay = 0.01f;
  h.regularization = reg;
  h.momentum = (type == "AdaGrad" || type == "RMSProp") ? 0.f : 0.9f;
  h.delta = 1e-6f;
  h.rms_decay = 0.95f;
  h.momentum2 = 0.999f;
  return h;
}

// Runs three steps of `type` in float and in double and compares.
void CheckRule(const std::string& type, Regularization reg) {
  SCOPED_TRACE(type + (reg == Regularization::kL2 ? " L2" : " L1"));
  const SolverHyper hy = Hyper(type, reg);
  auto rule = MakeUpdateRule(hy);
  ASSERT_TRUE(rule.ok()) << rule.status().message();
  EXPECT_STREQ((*rule)->type(), type.c_str());
  const int slots = (*rule)->history_slots();
  EXPECT_EQ(slots, (type == "AdaDelta" || type == "Adam") ? 2 : 1);
  const ParamHyper ph{2.f, 0.5f};
  FloatState fs(kData, slots);
  RefState ref{kData, std::vector<Vec>(slots, Vec(kData.size(), 0.0))};
  for (int iter = 0; iter < 3; ++iter) {
    const StepInputs in{0.1f * static_cast<float>(iter + 1), iter, iter == 1 ? 0.5f : 1.f};
    std::vector<float> diff(kGrads[iter].begin(), kGrads[iter].end());
    (*rule)->Apply(in, ph, fs.Slice(diff.data(), 0, diff.size()));
    RefStep(hy, ph, in, kGrads[iter], &ref);
    for (size_t i = 0; i < kData.size(); ++i) {
      EXPECT_NEAR(fs.data[i], ref.data[i], 1e-5 * std::max(1.0, std::abs(ref.data[i])))
          << "step " << iter << " element " << i;
      for (int s = 0; s < slots; ++s) {
        EXPECT_NEAR(fs.hist[s][i], ref.hist[s][i], 1e-5 * std::max(1.0, std::abs(ref.hist[s][i])))
            << "history " << s << " step " << iter << " element " << i;
      }
    }
  }
}

TEST(UpdateRuleTest, EveryRuleMatchesCaffeFormulasL2) {
  for (const std::string& t : UpdateRuleRegistry::Global().Types())
    CheckRule(std::string(t), Regularization::kL2);
}

TEST(UpdateRuleTest, EveryRuleMatchesCaffeFormulasL1) {
  for (const std::string& t : UpdateRuleRegistry::Global().Types())
    CheckRule(std::string(t), Regularization::kL1);
}

// Hand-computed numbers for the two most common rules.
TEST(UpdateRuleTest, SgdMomentumHandComputed) {
  SolverHyper hy;
  hy.base_lr = 0.1f;
  hy.momentum = 0.9f;
  hy.weight_decay = 0.1f;
  auto rule = MakeUpdateRule(hy);
  ASSERT_TRUE(rule.ok());
  FloatState fs({1.0}, 1);
  std::vector<float> diff = {0.5f};
  (*rule)->Apply({0.1f, 0, 1.f}, {}, fs.Slice(diff.data(), 0, 1));
  // g = 0.5 + 0.1 * 1 = 0.6; h = 0.1 * 0.6 = 0.06; w = 0.94.
  EXPECT_FLOAT_EQ(fs.hist[0][0], 0.06f);
  EXPECT_FLOAT_EQ(fs.data[0], 0.94f);
  diff = {0.5f};
  (*rule)->Apply({0.1f, 1, 1.f}, {}, fs.Slice(diff.data(), 0, 1));
  // g = 0.5 + 0.094 = 0.594; h = 0.0594 + 0.054 = 0.1134; w = 0.8266.
  EXPECT_FLOAT_EQ(fs.hist[0][0], 0.1134f);
  EXPECT_FLOAT_EQ(fs.data[0], 0.8266f);
  EXPECT_FLOAT_EQ(diff[0], 0.1134f);  // diff holds the applied update
}

TEST(UpdateRuleTest, AdamFirstStepIsBiasCorrected) {
  SolverHyper hy;
  hy.type = "Adam";
  hy.base_lr = 0.01f;
  hy.momentum = 0.9f;
  hy.momentum2 = 0.999f;
  hy.delta = 1e-8f;
  auto rule = MakeUpdateRule(hy);
  ASSERT_TRUE(rule.ok());
  FloatState fs({1.0, 1.0}, 2);
  std::vector<float> diff = {0.3f, -2.f};
  (*rule)->Apply({0.01f, 0, 1.f}, {}, fs.Slice(diff.data(), 0, 2));
  // m = 0.1 g, v = 0.001 g^2; correction = sqrt(0.001) / 0.1; update = lr * sign(g).
  EXPECT_NEAR(fs.hist[0][0], 0.03, 1e-7);
  EXPECT_NEAR(fs.hist[1][1], 0.004, 1e-7);  // (1 - 0.999f) is inexact in float
  EXPECT_NEAR(fs.data[0], 0.99, 1e-6);
  EXPECT_NEAR(fs.data[1], 1.01, 1e-6);
}

TEST(UpdateRuleTest, ZeroDecayAndUnitScaleLeaveGradientUntouched) {
  SolverHyper hy;
  hy.base_lr = 1.f;
  auto rule = MakeUpdateRule(hy);
  ASSERT_TRUE(rule.ok());
  FloatState fs({0.0, 5.0}, 1);
  std::vector<float> diff = {0.1f, 0.2f};
  (*rule)->Apply({1.f, 0, 1.f}, {1.f, 0.f}, fs.Slice(diff.data(), 0, 2));
  EXPECT_EQ(fs.data[0], -0.1f);
  EXPECT_EQ(fs.data[1], 5.f - 0.2f);
}

TEST(UpdateRuleTest, SlicesGiveBitIdenticalResults) {
  const Vec data = {0.3, -1.2, 0.0, 2.5, -0.7, 0.05, 1.1, -3.0, 0.9, -0.01};
  for (const std::string& t : UpdateRuleRegistry::Global().Types()) {
    for (Regularization reg : {Regularization::kL2, Regularization::kL1}) {
      SCOPED_TRACE(std::string(t));
      const SolverHyper hy = Hyper(std::string(t), reg);
      auto rule = MakeUpdateRule(hy);
      ASSERT_TRUE(rule.ok());
      const int slots = (*rule)->history_slots();
      FloatState whole(data, slots), sliced(data, slots);
      for (int iter = 0; iter < 3; ++iter) {
        std::vector<float> g(data.size());
        for (size_t i = 0; i < g.size(); ++i) g[i] = std::sin(float(i * 7 + iter * 3)) * 0.4f;
        std::vector<float> g2 = g;
        const StepInputs in{0.05f, iter, 0.7f};
        const ParamHyper ph{1.5f, 2.f};
        (*rule)->Apply(in, ph, whole.Slice(g.data(), 0, g.size()));
        (*rule)->Apply(in, ph, sliced.Slice(g2.data(), 0, 3));
        (*rule)->Apply(in, ph, sliced.Slice(g2.data(), 3, 4));
        (*rule)->Apply(in, ph, sliced.Slice(g2.data(), 7, 3));
        EXPECT_EQ(0, std::memcmp(g.data(), g2.data(), g.size() * sizeof(float)));
      }
      EXPECT_EQ(0, std::memcmp(whole.data.data(), sliced.data.data(), data.size() * 4));
      for (int s = 0; s < slots; ++s) {
        EXPECT_EQ(0, std::memcmp(whole.hist[s].data(), sliced.hist[s].data(), data.size() * 4));
      }
    }
  }
}

TEST(UpdateRuleTest, UnknownTypeIsRejected) {
  SolverHyper hy;
  hy.type = "LBFGS";
  auto rule = MakeUpdateRule(hy);
  ASSERT_FALSE(rule.ok());
  EXPECT_EQ(rule.status().message(),
            "type: unknown solver type \"LBFGS\"; known types: SGD, Nesterov, AdaGrad, RMSProp, "
            "AdaDelta, Adam");
}

TEST(ClipTest, SumSquaresAndClipScale) {
  const float a[] = {3.f, -4.f, 12.f};
  EXPECT_DOUBLE_EQ(SumSquares(a, 2), 25.0);
  EXPECT_DOUBLE_EQ(SumSquares(a, 2) + SumSquares(a + 2, 1), 169.0);
  EXPECT_EQ(ClipScale(169.0, -1.f), 1.f);  // off
  EXPECT_EQ(ClipScale(169.0, 13.f), 1.f);  // norm == clip: untouched
  EXPECT_EQ(ClipScale(169.0, 20.f), 1.f);
  EXPECT_FLOAT_EQ(ClipScale(169.0, 6.5f), 0.5f);
  EXPECT_FLOAT_EQ(ClipScale(25.0, 1.f), 0.2f);
  EXPECT_EQ(ClipScale(25.0, 0.f), 0.f);  // Caffe: 0 zeroes the gradients
  EXPECT_EQ(ClipScale(0.0, 0.f), 1.f);
}

SolverHyper Policy(const std::string& policy) {
  SolverHyper h;
  h.base_lr = 0.5f;
  h.lr_policy = policy;
  h.gamma = 0.1f;
  h.power = 0.75f;
  h.stepsize = 10;
  h.stepvalue = {5, 12, 30};
  h.max_iter = 100;
  return h;
}

TEST(LrPolicyTest, EveryPolicyMatchesCaffeFormula) {
  const double base = 0.5, gamma = 0.1f, power = 0.75f;
  for (int iter : {0, 1, 4, 5, 9, 10, 11, 12, 19, 20, 29, 30, 31, 50, 99, 100}) {
    SCOPED_TRACE(iter);
    EXPECT_FLOAT_EQ(LearningRate(Policy("fixed"), iter), 0.5f);
    EXPECT_FLOAT_EQ(LearningRate(Policy("step"), iter), base * std::pow(gamma, iter / 10));
    EXPECT_FLOAT_EQ(LearningRate(Policy("exp"), iter), base * std::pow(gamma, iter));
    EXPECT_FLOAT_EQ(LearningRate(Policy("inv"), iter), base * std::pow(1 + gamma * iter, -power));
    const int steps = (iter >= 5) + (iter >= 12) + (iter >= 30);
    EXPECT_FLOAT_EQ(LearningRate(Policy("multistep"), iter), base * std::pow(gamma, steps));
    // Caffe forms 1 - iter / max_iter in float; near max_iter that cancels.
    const double poly_base = 1.f - static_cast<float>(iter) / 100.f;
    EXPECT_FLOAT_EQ(LearningRate(Policy("poly"), iter), base * std::pow(poly_base, power));
    EXPECT_NEAR(LearningRate(Policy("poly"), iter), base * std::pow(1 - iter / 100.0, power), 1e-6);
    EXPECT_FLOAT_EQ(LearningRate(Policy("sigmoid"), iter),
                    base / (1 + std::exp(-gamma * (iter - 10))));
  }
}

TEST(LrPolicyTest, StepBoundaries) {
  EXPECT_FLOAT_EQ(LearningRate(Policy("step"), 9), 0.5f);
  EXPECT_FLOAT_EQ(LearningRate(Policy("step"), 10), 0.05f);
  EXPECT_FLOAT_EQ(LearningRate(Policy("multistep"), 4), 0.5f);
  EXPECT_FLOAT_EQ(LearningRate(Policy("multistep"), 5), 0.05f);
  EXPECT_FLOAT_EQ(LearningRate(Policy("multistep"), 11), 0.05f);
  EXPECT_FLOAT_EQ(LearningRate(Policy("multistep"), 12), 0.005f);
  EXPECT_FLOAT_EQ(LearningRate(Policy("multistep"), 1000), 0.0005f);
  SolverHyper none = Policy("multistep");
  none.stepvalue.clear();
  EXPECT_FLOAT_EQ(LearningRate(none, 1000), 0.5f);
}

// The message ValidateSolverHyper gives for a valid hyper of `type` and
// `policy` after `edit`.
template <typename Edit>
std::string ErrorOf(const std::string& type, const std::string& policy, Edit edit) {
  SolverHyper h = Policy(policy);
  h.type = type;
  edit(h);
  Status s = ValidateSolverHyper(h);
  return s.ok() ? "ok" : s.message();
}

TEST(ValidateTest, ValidHypersPass) {
  for (std::string_view p : kLrPolicies) {
    EXPECT_TRUE(ValidateSolverHyper(Policy(std::string(p))).ok()) << p;
  }
  for (const std::string& t : UpdateRuleRegistry::Global().Types()) {
    EXPECT_TRUE(ValidateSolverHyper(Hyper(std::string(t), Regularization::kL1)).ok()) << t;
  }
}

TEST(ValidateTest, EachBadValueHasItsMessage) {
  using H = SolverHyper&;
  EXPECT_EQ(ErrorOf("sgd", "fixed", [](H) {}),
            "type: unknown solver type \"sgd\"; known types: SGD, Nesterov, AdaGrad, RMSProp, "
            "AdaDelta, Adam");
  EXPECT_EQ(ErrorOf("SGD", "cosine", [](H) {}),
            "lr_policy: unknown policy \"cosine\"; known policies: fixed, step, exp, inv, "
            "multistep, poly, sigmoid");
  EXPECT_EQ(ErrorOf("SGD", "fixed", [](H h) { h.base_lr = -0.1f; }),
            "base_lr must be >= 0, got -0.1");
  EXPECT_EQ(ErrorOf("SGD", "fixed", [](H h) { h.base_lr = NAN; }), "base_lr must be >= 0, got nan");
  EXPECT_EQ(ErrorOf("SGD", "fixed", [](H h) { h.weight_decay = -1.f; }),
            "weight_decay must be >= 0, got -1");
  EXPECT_EQ(ErrorOf("SGD", "fixed", [](H h) { h.iter_size = 0; }), "iter_size must be >= 1, got 0");
  EXPECT_EQ(ErrorOf("SGD", "fixed", [](H h) { h.max_iter = -5; }), "max_iter must be >= 0, got -5");
  EXPECT_EQ(ErrorOf("SGD", "step", [](H h) { h.stepsize = 0; }),
            "stepsize must be > 0 for lr_policy \"step\", got 0");
  EXPECT_EQ(ErrorOf("SGD", "sigmoid", [](H h) { h.stepsize = -3; }),
            "stepsize must be > 0 for lr_policy \"sigmoid\", got -3");
  EXPECT_EQ(ErrorOf("SGD", "exp", [](H h) { h.gamma = -0.5f; }),
            "gamma must be >= 0 for lr_policy \"exp\", got -0.5");
  EXPECT_EQ(ErrorOf("SGD", "poly", [](H h) { h.max_iter = 0; }),
            "max_iter must be > 0 for lr_policy \"poly\", got 0");
  EXPECT_EQ(ErrorOf("SGD", "multistep",
                    [](H h) {
                      h.stepvalue = {5, 9, 9};
                    }),
            "stepvalue must be strictly increasing, but stepvalue[2] = 9 follows 9");
  EXPECT_EQ(ErrorOf("SGD", "fixed", [](H h) { h.momentum = 1.f; }),
            "momentum must lie in [0, 1) for solver type \"SGD\", got 1");
  EXPECT_EQ(ErrorOf("Nesterov", "fixed", [](H h) { h.momentum = -0.1f; }),
            "momentum must lie in [0, 1) for solver type \"Nesterov\", got -0.1");
  EXPECT_EQ(ErrorOf("AdaGrad", "fixed", [](H h) { h.momentum = 0.9f; }),
            "momentum must be 0 for solver type \"AdaGrad\", got 0.9");
  EXPECT_EQ(ErrorOf("RMSProp", "fixed", [](H h) { h.momentum = 0.5f; }),
            "momentum must be 0 for solver type \"RMSProp\", got 0.5");
  EXPECT_EQ(ErrorOf("RMSProp", "fixed", [](H h) { h.rms_decay = 1.f; }),
            "rms_decay must lie in [0, 1) for solver type \"RMSProp\", got 1");
  EXPECT_EQ(ErrorOf("Adam", "fixed", [](H h) { h.momentum2 = 1.5f; }),
            "momentum2 must lie in [0, 1) for solver type \"Adam\", got 1.5");
  EXPECT_EQ(ErrorOf("AdaDelta", "fixed", [](H h) { h.delta = 0.f; }),
            "delta must be > 0 for solver type \"AdaDelta\", got 0");
}

Result<SolverHyper> FromText(const std::string& text) {
  caffe::SolverParameter param;
  if (!google::protobuf::TextFormat::ParseFromString(text, &param)) {
    return Status::Error("test: bad prototxt");
  }
  return SolverHyperFromProto(param);
}

TEST(SolverProtoTest, MapsEveryField) {
  auto h = FromText(R"(
    type: "Adam" base_lr: 0.01 lr_policy: "multistep" gamma: 0.5 power: 2 stepsize: 7
    stepvalue: 100 stepvalue: 200 max_iter: 1000 momentum: 0.9 momentum2: 0.99 delta: 1e-6
    rms_decay: 0.9 weight_decay: 0.0005 regularization_type: "L1" clip_gradients: 10
    iter_size: 4)");
  ASSERT_TRUE(h.ok()) << h.status().message();
  EXPECT_EQ(h->type, "Adam");
  EXPECT_EQ(h->base_lr, 0.01f);
  EXPECT_EQ(h->lr_policy, "multistep");
  EXPECT_EQ(h->gamma, 0.5f);
  EXPECT_EQ(h->power, 2.f);
  EXPECT_EQ(h->stepsize, 7);
  EXPECT_EQ(h->stepvalue, (std::vector<int>{100, 200}));
  EXPECT_EQ(h->max_iter, 1000);
  EXPECT_EQ(h->momentum, 0.9f);
  EXPECT_EQ(h->momentum2, 0.99f);
  EXPECT_EQ(h->delta, 1e-6f);
  EXPECT_EQ(h->rms_decay, 0.9f);
  EXPECT_EQ(h->weight_decay, 0.0005f);
  EXPECT_EQ(h->regularization, Regularization::kL1);
  EXPECT_EQ(h->clip_gradients, 10.f);
  EXPECT_EQ(h->iter_size, 4);
}

TEST(SolverProtoTest, DefaultsMatchCaffe) {
  auto h = FromText(R"(base_lr: 0.1 lr_policy: "fixed")");
  ASSERT_TRUE(h.ok()) << h.status().message();
  EXPECT_EQ(h->type, "SGD");
  EXPECT_EQ(h->regularization, Regularization::kL2);
  EXPECT_EQ(h->clip_gradients, -1.f);
  EXPECT_EQ(h->iter_size, 1);
  EXPECT_EQ(h->momentum2, 0.999f);
  EXPECT_EQ(h->delta, 1e-8f);
  EXPECT_EQ(h->rms_decay, 0.99f);
}

TEST(SolverProtoTest, DeprecatedSolverTypeIsUpgraded) {
  const std::pair<const char*, const char*> cases[] = {
      {"SGD", "SGD"},         {"NESTEROV", "Nesterov"}, {"ADAGRAD", "AdaGrad"},
      {"RMSPROP", "RMSProp"}, {"ADADELTA", "AdaDelta"}, {"ADAM", "Adam"}};
  for (const auto& [old_name, type] : cases) {
    auto h = FromText(std::string("lr_policy: \"fixed\" solver_type: ") + old_name);
    ASSERT_TRUE(h.ok()) << h.status().message();
    EXPECT_EQ(h->type, type);
  }
}

TEST(SolverProtoTest, Errors) {
  EXPECT_EQ(FromText(R"(lr_policy: "fixed" solver_type: ADAM type: "Adam")").status().message(),
            "solver_type (deprecated enum) and type (string) cannot both be specified");
  EXPECT_EQ(FromText(R"(lr_policy: "fixed" regularization_type: "L3")").status().message(),
            "regularization_type: unknown type \"L3\"; known types: L2, L1");
  EXPECT_EQ(FromText(R"(lr_policy: "step" stepsize: 0)").status().message(),
            "stepsize must be > 0 for lr_policy \"step\", got 0");
  EXPECT_EQ(FromText("base_lr: 0.1").status().message(),
            "lr_policy: unknown policy \"\"; known policies: fixed, step, exp, inv, multistep, "
            "poly, sigmoid");
}

}  // namespace
}  // namespace pstrain::optim
