// The update-rule registry: Caffe's six rules in Caffe's order, each with its
// GPU kernel exactly when CUDA is built; a rule registered by a test (a
// CPU-only "HalfStep" rule: w -= rate * g / 2) is listed, validated, made and
// applied on the CPU like any other, and refused with one message wherever a
// job would update on the GPU (the server's device chunk store here; the
// trainer and ps-server ask the same CheckGpuKernel).
#include "common/optim/update_rule_registry.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/optim/update_rule.hpp"
#include "server/chunk_store.hpp"

namespace pstrain::optim {
namespace {

class HalfStepRule final : public UpdateRule {
 public:
  explicit HalfStepRule(const SolverHyper& h) : UpdateRule(h) {}
  const char* type() const override { return "HalfStep"; }
  int history_slots() const override { return 0; }

 protected:
  void ComputeUpdate(const StepInputs&, float local_rate, const ParamSlice& s) const override {
    for (size_t i = 0; i < s.n; ++i) s.diff[i] = local_rate * s.diff[i] * 0.5f;
  }
};

// Registers HalfStep (CPU only) for one test and removes it after.
class HalfStepRegistered : public ::testing::Test {
 protected:
  void SetUp() override {
    UpdateRuleRegistry::Global().AddCpu("HalfStep", kNotInCaffe,
                                        [](const SolverHyper& h) -> std::unique_ptr<UpdateRule> {
                                          return std::make_unique<HalfStepRule>(h);
                                        });
  }
  void TearDown() override { UpdateRuleRegistry::Global().Remove("HalfStep"); }

  static SolverHyper HalfStep() {
    SolverHyper h;
    h.type = "HalfStep";
    h.base_lr = 0.1f;
    return h;
  }
};

// What CheckGpuKernel lists as the rules with a GPU kernel in this build.
std::string GpuRules() {
#ifdef PSTRAIN_HAVE_CUDA
  return "SGD, Nesterov, AdaGrad, RMSProp, AdaDelta, Adam";
#else
  return "none in this build";
#endif
}

TEST(UpdateRuleRegistryTest, CaffesRulesInCaffesOrderWithTheirGpuKernels) {
  const std::vector<std::string> caffe = {"SGD",     "Nesterov", "AdaGrad",
                                          "RMSProp", "AdaDelta", "Adam"};
  EXPECT_EQ(UpdateRuleRegistry::Global().Types(), caffe);
#ifdef PSTRAIN_HAVE_CUDA
  EXPECT_EQ(UpdateRuleRegistry::Global().GpuTypes(), caffe);
#else
  EXPECT_TRUE(UpdateRuleRegistry::Global().GpuTypes().empty());
#endif
  for (const std::string& type : caffe) {
    SolverHyper h;
    h.type = type;
    h.momentum = (type == "AdaGrad" || type == "RMSProp") ? 0.f : 0.9f;
    auto rule = MakeUpdateRule(h);
    ASSERT_TRUE(rule.ok()) << rule.status().message();
    EXPECT_STREQ((*rule)->type(), type.c_str());
#ifdef PSTRAIN_HAVE_CUDA
    EXPECT_TRUE((*rule)->has_gpu_kernel()) << type;
    EXPECT_TRUE(CheckGpuKernel(type).ok()) << type;
#else
    EXPECT_FALSE((*rule)->has_gpu_kernel()) << type;
#endif
  }
}

TEST_F(HalfStepRegistered, IsListedValidatedAndAppliedOnTheCpu) {
  EXPECT_EQ(UpdateRuleRegistry::Global().Types().back(), "HalfStep");
  auto rule = MakeUpdateRule(HalfStep());
  ASSERT_TRUE(rule.ok()) << rule.status().message();
  EXPECT_FALSE((*rule)->has_gpu_kernel());
  std::vector<float> data = {1.f, -2.f}, diff = {0.4f, 0.8f};
  (*rule)->Apply({0.1f, 0, 1.f}, {2.f, 1.f}, ParamSlice{data.data(), diff.data(), {}, 2});
  // local rate 0.1 * 2 = 0.2; update = 0.2 * g / 2.
  EXPECT_FLOAT_EQ(data[0], 1.f - 0.04f);
  EXPECT_FLOAT_EQ(data[1], -2.f - 0.08f);
}

TEST_F(HalfStepRegistered, WithoutAGpuKernelItIsRefusedWithOneMessage) {
  EXPECT_EQ(CheckGpuKernel("HalfStep").ToString(),
            "FailedPrecondition: update rule \"HalfStep\" has no GPU kernel (rules with one: " +
                GpuRules() + "); update on the CPU");
}

TEST_F(HalfStepRegistered, AServerOnTheGpuRefusesItBeforeAnyUpdate) {
  const KeyPlacement placement = KeyPlacement::Create({4}, 1, 16).value();
  auto store = server::ChunkStore::Create(placement, 0, {{1, 1}}, HalfStep(), /*device=*/0);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().message(),
            "server_device gpu:0: update rule \"HalfStep\" has no GPU kernel (rules with one: " +
                GpuRules() + "); update on the CPU");
  // On the CPU the same rule is fine.
  EXPECT_TRUE(server::ChunkStore::Create(placement, 0, {{1, 1}}, HalfStep(), -1).ok());
}

TEST(UpdateRuleRegistryTest, RemovedRuleIsUnknownAgain) {
  SolverHyper h;
  h.type = "HalfStep";
  EXPECT_EQ(MakeUpdateRule(h).status().message(),
            "type: unknown solver type \"HalfStep\"; known types: SGD, Nesterov, AdaGrad, "
            "RMSProp, AdaDelta, Adam");
}

}  // namespace
}  // namespace pstrain::optim
