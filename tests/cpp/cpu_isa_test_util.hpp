// The vectorised kernels' ISA variants in tests (worker/layers/cpu_kernel_isa.hpp):
// which ones this CPU runs, and a guard that restores the variant a test overrode.
#pragma once

#include <vector>

#include "worker/layers/cpu_kernel_isa.hpp"

namespace pstrain::testing {

// The ISA variants this CPU runs, lowest first.
inline std::vector<CpuIsa> RunnableIsas() {
  std::vector<CpuIsa> isas;
  for (CpuIsa isa : {CpuIsa::kGeneric, CpuIsa::kAvx2, CpuIsa::kAvx512}) {
    if (static_cast<int>(isa) <= static_cast<int>(SupportedCpuIsa())) isas.push_back(isa);
  }
  return isas;
}

// Restores the kernels' ISA when a test that overrides it ends.
class IsaRestorer {
 public:
  IsaRestorer() : saved_(KernelIsa()) {}
  IsaRestorer(const IsaRestorer&) = delete;
  IsaRestorer& operator=(const IsaRestorer&) = delete;
  ~IsaRestorer() { OverrideKernelIsa(saved_); }

 private:
  CpuIsa saved_;
};

}  // namespace pstrain::testing
