#include "worker/layers/cpu_kernel_isa.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace pstrain {
namespace {

std::atomic<int> g_kernel_isa{-1};  // -1: not chosen yet
std::atomic<int> g_last_isa{-1};

}  // namespace

const char* CpuIsaName(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kAvx512:
      return "avx512";
    case CpuIsa::kAvx2:
      return "avx2";
    case CpuIsa::kGeneric:
      break;
  }
  return "generic";
}

CpuIsa SupportedCpuIsa() {
#if !defined(__x86_64__)
  return CpuIsa::kGeneric;  // the AVX variants are x86-64 only (worker/CMakeLists.txt)
#else
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl")) {
    return CpuIsa::kAvx512;
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return CpuIsa::kAvx2;
  return CpuIsa::kGeneric;
#endif
}

Result<CpuIsa> CpuIsaFromSetting(const char* value, CpuIsa supported) {
  if (value == nullptr || *value == '\0') return supported;
  for (CpuIsa isa : {CpuIsa::kGeneric, CpuIsa::kAvx2, CpuIsa::kAvx512}) {
    if (std::strcmp(value, CpuIsaName(isa)) != 0) continue;
    if (static_cast<int>(isa) > static_cast<int>(supported)) {
      return Status::Error(std::string("PSTRAIN_CPU_ISA=") + value + ": this CPU supports up to " +
                           CpuIsaName(supported));
    }
    return isa;
  }
  return Status::Error(std::string("PSTRAIN_CPU_ISA=") + value +
                       ": unknown (choices: generic, avx2, avx512)");
}

CpuIsa KernelIsa() {
  int isa = g_kernel_isa.load(std::memory_order_acquire);
  if (isa >= 0) return static_cast<CpuIsa>(isa);
  const CpuIsa supported = SupportedCpuIsa();
  Result<CpuIsa> chosen = CpuIsaFromSetting(std::getenv("PSTRAIN_CPU_ISA"), supported);
  if (!chosen.ok()) {
    std::fprintf(stderr, "pstrain: %s; the vectorised kernels run %s\n",
                 chosen.status().message().c_str(), CpuIsaName(supported));
  }
  isa = static_cast<int>(chosen.ok() ? chosen.value() : supported);
  int expected = -1;
  // Another thread may have chosen first; both chose from the same inputs.
  g_kernel_isa.compare_exchange_strong(expected, isa, std::memory_order_acq_rel);
  return static_cast<CpuIsa>(g_kernel_isa.load(std::memory_order_acquire));
}

void OverrideKernelIsa(CpuIsa isa) { g_kernel_isa.store(static_cast<int>(isa)); }

CpuIsa LastKernelIsa() {
  const int last = g_last_isa.load(std::memory_order_relaxed);
  return last < 0 ? KernelIsa() : static_cast<CpuIsa>(last);
}

void NoteKernelIsa(CpuIsa isa) {
  g_last_isa.store(static_cast<int>(isa), std::memory_order_relaxed);
}

}  // namespace pstrain
