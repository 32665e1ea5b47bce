#include "server/device_chunks.hpp"

#include <algorithm>
#include <string>

#include "common/device.hpp"

#ifdef PSTRAIN_HAVE_CUDA
#include <cuda_runtime.h>

#include "common/cuda/cuda_check.hpp"
#include "common/cuda/device_allocator.hpp"
#include "common/cuda/gpu_context.hpp"
#endif

namespace pstrain::server {

Status CheckServerDevice(int device) {
  return CheckCudaDevice(device, "gpu:" + std::to_string(device));
}

Result<int> ParseServerDevice(const std::string& text) {
  if (text == "cpu") return -1;
  const std::string prefix = "gpu:";
  if (text.rfind(prefix, 0) == 0 && text.size() > prefix.size() && text.size() <= 8 &&
      std::all_of(text.begin() + 4, text.end(), [](char ch) { return ch >= '0' && ch <= '9'; })) {
    return std::stoi(text.substr(prefix.size()));
  }
  return Status::Error("--device '" + text + "' is not cpu or gpu:N");
}

#ifndef PSTRAIN_HAVE_CUDA

struct DeviceChunks::State {};

Result<std::unique_ptr<DeviceChunks>> DeviceChunks::Create(int device,
                                                           const std::vector<int64_t>&, int) {
  return CheckServerDevice(device);
}

DeviceChunks::DeviceChunks(std::unique_ptr<State> state) : state_(std::move(state)) {}
DeviceChunks::~DeviceChunks() = default;
void DeviceChunks::Upload(int, int, const float*) { PSTRAIN_CHECK(false); }
void DeviceChunks::Download(int, int, float*) { PSTRAIN_CHECK(false); }
void DeviceChunks::Apply(int, const optim::UpdateRule&, const optim::StepInputs&,
                         const optim::ParamHyper&, const float*) {
  PSTRAIN_CHECK(false);
}

#else  // PSTRAIN_HAVE_CUDA

struct DeviceChunks::State {
  int device = 0;
  int slots = 0;
  std::vector<int64_t> lengths;
  std::vector<std::vector<float*>> arrays;  // per chunk: weights, then history slots
  float* grad = nullptr;                    // the longest chunk's worth, the rule's scratch

  // Makes `device` this thread's device; returns its compute stream.
  cudaStream_t Stream() {
    GpuContext& gpu = GpuContext::ForThisThread();
    if (gpu.device() != device) {
      const Status s = gpu.SelectDevice(device);
      PSTRAIN_CHECK_MSG(s.ok(), s.message());
    }
    return gpu.stream();
  }
  float* Array(int c, int k) {
    return arrays[static_cast<size_t>(c)][static_cast<size_t>(k + 1)];
  }
  size_t Bytes(int c) const { return static_cast<size_t>(lengths[static_cast<size_t>(c)]) * 4; }
};

Result<std::unique_ptr<DeviceChunks>> DeviceChunks::Create(int device,
                                                           const std::vector<int64_t>& lengths,
                                                           int history_slots) {
  PSTRAIN_RETURN_IF_ERROR(CheckServerDevice(device));
  PSTRAIN_RETURN_IF_ERROR(GpuContext::ForThisThread().SelectDevice(device));
  auto state = std::make_unique<State>();
  state->device = device;
  state->slots = history_slots;
  state->lengths = lengths;
  std::unique_ptr<DeviceChunks> chunks(new DeviceChunks(std::move(state)));
  State& s = *chunks->state_;
  const cudaStream_t stream = s.Stream();
  int64_t longest = 0;
  for (size_t c = 0; c < lengths.size(); ++c) {
    s.arrays.emplace_back();
    for (int k = -1; k < history_slots; ++k) {
      PSTRAIN_ASSIGN_OR_RETURN(void* p, TryDeviceAlloc(s.Bytes(static_cast<int>(c))));
      s.arrays.back().push_back(static_cast<float*>(p));
      PSTRAIN_RETURN_IF_ERROR(CudaStatus(
          cudaMemsetAsync(p, 0, s.Bytes(static_cast<int>(c)), stream), "zeroing a chunk"));
    }
    longest = std::max(longest, lengths[c]);
  }
  PSTRAIN_ASSIGN_OR_RETURN(void* grad, TryDeviceAlloc(static_cast<size_t>(longest) * 4));
  s.grad = static_cast<float*>(grad);
  PSTRAIN_RETURN_IF_ERROR(CudaStatus(cudaStreamSynchronize(stream), "zeroing the chunks"));
  return chunks;
}

DeviceChunks::DeviceChunks(std::unique_ptr<State> state) : state_(std::move(state)) {}

DeviceChunks::~DeviceChunks() {
  if (!state_) return;
  state_->Stream();
  GpuContext::ForThisThread().SynchronizeQuietly();  // may run while a failure is reported
  for (auto& chunk : state_->arrays) {
    for (float* p : chunk) DeviceFree(p);
  }
  DeviceFree(state_->grad);
}

void DeviceChunks::Upload(int c, int k, const float* host) {
  State& s = *state_;
  const cudaStream_t stream = s.Stream();
  PSTRAIN_CUDA_CHECK(
      cudaMemcpyAsync(s.Array(c, k), host, s.Bytes(c), cudaMemcpyHostToDevice, stream));
  GpuContext::ForThisThread().Synchronize();  // also reports an update kernel that failed
}

void DeviceChunks::Download(int c, int k, float* host) {
  State& s = *state_;
  const cudaStream_t stream = s.Stream();
  PSTRAIN_CUDA_CHECK(
      cudaMemcpyAsync(host, s.Array(c, k), s.Bytes(c), cudaMemcpyDeviceToHost, stream));
  GpuContext::ForThisThread().Synchronize();  // also reports an update kernel that failed
}

void DeviceChunks::Apply(int c, const optim::UpdateRule& rule, const optim::StepInputs& in,
                         const optim::ParamHyper& param, const float* grad) {
  State& s = *state_;
  const cudaStream_t stream = s.Stream();
  // From pageable memory the copy returns once `grad` is staged, so the
  // caller may reuse it; the kernel below is ordered after the copy.
  PSTRAIN_CUDA_CHECK(cudaMemcpyAsync(s.grad, grad, s.Bytes(c), cudaMemcpyHostToDevice, stream));
  std::vector<float*>& arrays = s.arrays[static_cast<size_t>(c)];
  rule.ApplyOnDevice(in, param,
                     optim::DeviceSlice{arrays[0], s.grad, arrays.data() + 1,
                                        static_cast<size_t>(s.lengths[static_cast<size_t>(c)])},
                     stream);
}

#endif  // PSTRAIN_HAVE_CUDA

}  // namespace pstrain::server
