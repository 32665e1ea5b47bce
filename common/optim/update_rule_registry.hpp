// UpdateRuleRegistry: solver type name -> the rule's CPU factory and, in CUDA
// builds, its GPU kernel. A rule is two files side by side, as Caffe keeps
// sgd_solver.cpp and sgd_solver.cu:
//   common/optim/<rule>.cpp  the CPU rule (an UpdateRule), registered with
//                            PSTRAIN_REGISTER_UPDATE_RULE;
//   common/optim/<rule>.cu   its GPU kernel, registered into the same entry
//                            with PSTRAIN_REGISTER_GPU_KERNEL (compiled only
//                            when CUDA is on).
// Adding a rule touches no other file. A rule without a GPU kernel still
// runs on the CPU; CheckGpuKernel refuses it where a job would update on the
// GPU, before anything runs.
// Registration happens during static initialisation; afterwards lookups are
// thread-safe (one mutex guards the table, so tests may register a rule for
// a while and Remove it). Plain C++17: the .cu files include it.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/optim/step.hpp"
#include "common/status.hpp"

namespace pstrain::optim {

class UpdateRule;

// Where a rule Caffe lacks is listed (after Caffe's, by name).
inline constexpr int kNotInCaffe = 1000;

class UpdateRuleRegistry {
 public:
  using CpuFactory = std::unique_ptr<UpdateRule> (*)(const SolverHyper& hyper);
  struct Entry {
    int order = kNotInCaffe;
    CpuFactory make = nullptr;  // null until the CPU rule registered
    GpuKernel gpu = nullptr;    // null: no GPU kernel (or a build without CUDA)
  };

  static UpdateRuleRegistry& Global();

  // `order` ranks the type in Types(): Caffe's SolverParameter::SolverType
  // number for Caffe's rules (SGD 0 ... Adam 5), kNotInCaffe otherwise.
  // REQUIRES: `type` has no CPU rule yet (checked: a duplicate is our bug).
  bool AddCpu(const std::string& type, int order, CpuFactory make);
  // REQUIRES: `type` has no GPU kernel yet (checked).
  bool AddGpu(const std::string& type, GpuKernel kernel);
  // Forgets both parts of `type` (tests that register a rule for a while).
  void Remove(const std::string& type);

  // The entry of `type` when it has a CPU rule; nullopt otherwise (a GPU
  // kernel alone is no rule).
  std::optional<Entry> Find(const std::string& type) const;
  // The types with a CPU rule, by order, then name.
  std::vector<std::string> Types() const;
  // Those of Types() that have a GPU kernel, in the same order.
  std::vector<std::string> GpuTypes() const;

 private:
  mutable std::mutex mutex_;  // guards entries_
  std::map<std::string, Entry> entries_;
};

// Ok when rule `type` has a GPU kernel; otherwise FailedPrecondition:
//   update rule "T" has no GPU kernel (rules with one: SGD, ...); update on the CPU
// Callers put in front where the job asked for GPU updates.
Status CheckGpuKernel(const std::string& type);

}  // namespace pstrain::optim

// In <rule>.cpp: PSTRAIN_REGISTER_UPDATE_RULE("Adam", 5, AdamRule); Class has
// an explicit constructor from const SolverHyper&.
#define PSTRAIN_REGISTER_UPDATE_RULE(type_name, order, Class)            \
  static const bool PSTRAIN_CONCAT(pstrain_rule_registered_, __LINE__) = \
      ::pstrain::optim::UpdateRuleRegistry::Global().AddCpu(             \
          type_name, order,                                              \
          [](const ::pstrain::optim::SolverHyper& h)                     \
              -> std::unique_ptr<::pstrain::optim::UpdateRule> {         \
            return std::make_unique<Class>(h);                           \
          })

// In <rule>.cu: PSTRAIN_REGISTER_GPU_KERNEL("Adam", AdamGpu); the function is a GpuKernel.
#define PSTRAIN_REGISTER_GPU_KERNEL(type_name, function)                       \
  static const bool PSTRAIN_CONCAT(pstrain_gpu_kernel_registered_, __LINE__) = \
      ::pstrain::optim::UpdateRuleRegistry::Global().AddGpu(type_name, &function)
