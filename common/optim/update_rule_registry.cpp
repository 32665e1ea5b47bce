#include "common/optim/update_rule_registry.hpp"

#include <algorithm>

namespace pstrain::optim {

UpdateRuleRegistry& UpdateRuleRegistry::Global() {
  static UpdateRuleRegistry* registry = new UpdateRuleRegistry();  // never destroyed
  return *registry;
}

bool UpdateRuleRegistry::AddCpu(const std::string& type, int order, CpuFactory make) {
  std::lock_guard<std::mutex> lock(mutex_);
  Entry& entry = entries_[type];
  PSTRAIN_CHECK_MSG(entry.make == nullptr, "update rule \"" + type + "\" registered twice");
  entry.order = order;
  entry.make = make;
  return true;
}

bool UpdateRuleRegistry::AddGpu(const std::string& type, GpuKernel kernel) {
  std::lock_guard<std::mutex> lock(mutex_);
  Entry& entry = entries_[type];
  PSTRAIN_CHECK_MSG(entry.gpu == nullptr, "GPU kernel of \"" + type + "\" registered twice");
  entry.gpu = kernel;
  return true;
}

void UpdateRuleRegistry::Remove(const std::string& type) {
  std::lock_guard<std::mutex> lock(mutex_);
  entries_.erase(type);
}

std::optional<UpdateRuleRegistry::Entry> UpdateRuleRegistry::Find(const std::string& type) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = entries_.find(type);
  if (it == entries_.end() || it->second.make == nullptr) return std::nullopt;
  return it->second;
}

std::vector<std::string> UpdateRuleRegistry::Types() const {
  std::vector<std::pair<int, std::string>> ranked;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [type, entry] : entries_) {
      if (entry.make != nullptr) ranked.emplace_back(entry.order, type);
    }
  }
  std::sort(ranked.begin(), ranked.end());
  std::vector<std::string> types;
  for (auto& [order, type] : ranked) types.push_back(std::move(type));
  return types;
}

std::vector<std::string> UpdateRuleRegistry::GpuTypes() const {
  std::vector<std::string> types;
  for (std::string& type : Types()) {
    if (Find(type)->gpu != nullptr) types.push_back(std::move(type));
  }
  return types;
}

Status CheckGpuKernel(const std::string& type) {
  const auto entry = UpdateRuleRegistry::Global().Find(type);
  if (entry && entry->gpu != nullptr) return Status::Ok();
  std::string with_kernel;
  for (const std::string& t : UpdateRuleRegistry::Global().GpuTypes()) {
    with_kernel += (with_kernel.empty() ? "" : ", ") + t;
  }
  if (with_kernel.empty()) with_kernel = "none in this build";
  return Status::FailedPrecondition("update rule \"" + type +
                                    "\" has no GPU kernel (rules with one: " + with_kernel +
                                    "); update on the CPU");
}

}  // namespace pstrain::optim
