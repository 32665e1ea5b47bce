// What accelerators this build and this machine have. In a build without
// CUDA (PSTRAIN_WITH_CUDA=OFF, or no nvcc) both answers are "none".
#pragma once

#include <string>

#include "common/status.hpp"

namespace pstrain {

// True when the CUDA paths were compiled in.
bool BuiltWithCuda();
// Number of usable CUDA devices now (0 without CUDA, a driver or a GPU).
int CudaDeviceCount();
// One line describing the devices, or why there are none.
std::string DeviceSummary();
// Ok when CUDA device `device` exists and can be used. Otherwise, in a build
// without CUDA, "<what> needs a CUDA build" (what: how the user asked for it,
// e.g. "--gpu 0"); else "no CUDA device N (<why>)", why: the runtime's error
// or how many devices are visible.
Status CheckCudaDevice(int device, const std::string& what);
// CheckCudaDevice, then makes `device` the calling thread's device
// (GpuContext::SelectDevice): the programs' --gpu N.
Status UseCudaDevice(int device, const std::string& what);
// Waits for the work queued on the calling thread's GpuContext stream; a
// no-op in builds without CUDA.
void SynchronizeGpu();
// As SynchronizeGpu, but a failure of that work (a kernel that faulted) is an
// error "<what>: CUDA work on device N failed: ..." (GpuContext::Finish); Ok
// in builds without CUDA.
Status FinishGpuWork(const std::string& what);

}  // namespace pstrain
