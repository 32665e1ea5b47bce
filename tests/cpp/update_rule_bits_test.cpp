// The update rules' floats, pinned bit for bit: a hash of every weight, diff
// and history value after several steps of each rule (L2 and L1 decay, lr and
// decay multipliers, clip scales, SGD's fused paths). The hashes were taken
// from the rules as they stood before the CPU and GPU kernels moved into one
// registry; a refactoring that changes any float of any rule changes a hash.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "common/optim/update_rule.hpp"

namespace pstrain::optim {
namespace {

// FNV-1a over the bytes of the floats.
void Hash(uint64_t* h, const std::vector<float>& v) {
  for (float f : v) {
    uint32_t bits;
    std::memcpy(&bits, &f, sizeof(bits));
    for (int b = 0; b < 4; ++b) {
      *h ^= (bits >> (8 * b)) & 0xffu;
      *h *= 1099511628211ull;
    }
  }
}

SolverHyper Hyper(const std::string& type, Regularization reg, float weight_decay) {
  SolverHyper h;
  h.type = type;
  h.base_lr = 0.05f;
  h.momentum = (type == "AdaGrad" || type == "RMSProp") ? 0.f : (type == "AdaDelta" ? 0.95f : 0.9f);
  h.momentum2 = 0.999f;
  h.delta = type == "AdaDelta" ? 1e-6f : 1e-8f;
  h.rms_decay = 0.98f;
  h.weight_decay = weight_decay;
  h.regularization = reg;
  return h;
}

// Five steps of `type` on 67 floats; returns the hash of everything the rule wrote.
uint64_t RunRule(const std::string& type, Regularization reg, float weight_decay,
                 bool diff_holds_update) {
  const SolverHyper hyper = Hyper(type, reg, weight_decay);
  auto rule = MakeUpdateRule(hyper);
  EXPECT_TRUE(rule.ok()) << rule.status().message();
  if (!rule.ok()) return 0;
  const size_t n = 67;
  const int slots = (*rule)->history_slots();
  std::vector<float> data(n);
  for (size_t i = 0; i < n; ++i) data[i] = std::sin(0.37f * static_cast<float>(i)) * 1.3f;
  data[5] = 0.f;  // L1's sign(0)
  std::vector<std::vector<float>> history(static_cast<size_t>(slots), std::vector<float>(n, 0.f));
  std::vector<float*> history_ptrs;
  for (auto& h : history) history_ptrs.push_back(h.data());
  uint64_t hash = 14695981039346656037ull;
  for (int iter = 0; iter < 5; ++iter) {
    std::vector<float> diff(n);
    for (size_t i = 0; i < n; ++i) {
      diff[i] = std::cos(0.91f * static_cast<float>(i) + static_cast<float>(iter)) * 0.2f;
    }
    StepInputs in{0.05f * static_cast<float>(iter + 1), iter, iter % 2 == 0 ? 0.5f : 1.f};
    in.diff_holds_update = diff_holds_update;
    const ParamHyper param{iter == 3 ? 1.f : 2.f, 0.5f};
    (*rule)->Apply(in, param, ParamSlice{data.data(), diff.data(), history_ptrs, n});
    Hash(&hash, data);
    if (diff_holds_update) Hash(&hash, diff);
    for (const auto& h : history) Hash(&hash, h);
  }
  return hash;
}

uint64_t RunAll(const std::string& type) {
  uint64_t h = 0;
  for (Regularization reg : {Regularization::kL2, Regularization::kL1}) {
    for (float decay : {0.f, 5e-3f}) {
      for (bool holds : {true, false}) h = h * 31 + RunRule(type, reg, decay, holds);
    }
  }
  return h;
}

TEST(UpdateRuleBitsTest, SgdIsUnchanged) { EXPECT_EQ(RunAll("SGD"), 5483708026320362357ull); }
TEST(UpdateRuleBitsTest, NesterovIsUnchanged) {
  EXPECT_EQ(RunAll("Nesterov"), 10581669423211872514ull);
}
TEST(UpdateRuleBitsTest, AdaGradIsUnchanged) {
  EXPECT_EQ(RunAll("AdaGrad"), 10069835464200651137ull);
}
TEST(UpdateRuleBitsTest, RmsPropIsUnchanged) {
  EXPECT_EQ(RunAll("RMSProp"), 6535287138897960899ull);
}
TEST(UpdateRuleBitsTest, AdaDeltaIsUnchanged) {
  EXPECT_EQ(RunAll("AdaDelta"), 10669694514370336935ull);
}
TEST(UpdateRuleBitsTest, AdamIsUnchanged) { EXPECT_EQ(RunAll("Adam"), 10873907891672624500ull); }

}  // namespace
}  // namespace pstrain::optim
