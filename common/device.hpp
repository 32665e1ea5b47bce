// What accelerators this build and this machine have. In a build without
// CUDA (PSTRAIN_WITH_CUDA=OFF, or no nvcc) both answers are "none".
#pragma once

#include <string>

namespace pstrain {

// True when the CUDA paths were compiled in.
bool BuiltWithCuda();
// Number of usable CUDA devices now (0 without CUDA, a driver or a GPU).
int CudaDeviceCount();
// One line describing the devices, or why there are none.
std::string DeviceSummary();

}  // namespace pstrain
