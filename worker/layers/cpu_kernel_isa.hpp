// Which instruction set the layers' own vectorised CPU kernels run on
// (pooling_cpu_kernels, lrn_cpu_kernels). Each kernel is compiled three times
// (cpu_kernels_generic.cpp, cpu_kernels_avx2.cpp with -mavx2 -mfma,
// cpu_kernels_avx512.cpp with -mavx512f/bw/dq/vl) from the same loops; the
// build has no -march flag, so the choice is made here at run time: the best
// the CPU supports, lowered by the environment variable PSTRAIN_CPU_ISA
// (generic, avx2 or avx512; read once, at the first kernel call) to emulate an
// older machine. A value the CPU cannot run, or an unknown one, is reported
// once on stderr and the CPU's best is used.
#pragma once

#include <string>

#include "common/status.hpp"

namespace pstrain {

enum class CpuIsa { kGeneric = 0, kAvx2 = 1, kAvx512 = 2 };

const char* CpuIsaName(CpuIsa isa);

// The best variant this CPU can run (cpuid).
CpuIsa SupportedCpuIsa();

// The variant chosen for a PSTRAIN_CPU_ISA value (null or empty: none set) on
// a CPU supporting up to `supported`: an error naming the variable and the
// choices for an unknown value or one above `supported`.
Result<CpuIsa> CpuIsaFromSetting(const char* value, CpuIsa supported);

// The variant the kernels run: SupportedCpuIsa() lowered by PSTRAIN_CPU_ISA.
CpuIsa KernelIsa();

// Makes the kernels run `isa` from now on (tests and benchmarks comparing
// the variants). REQUIRES: isa <= SupportedCpuIsa(); no kernel running.
void OverrideKernelIsa(CpuIsa isa);

// The variant the last kernel call ran (KernelIsa() before any ran).
CpuIsa LastKernelIsa();
void NoteKernelIsa(CpuIsa isa);  // called by the dispatchers

}  // namespace pstrain
