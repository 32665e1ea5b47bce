// DeviceChunks: a shard's chunk weights and update history in GPU memory, for
// ChunkStore on a server with `device >= 0` (ShardConfig::device).
//
// Each call makes `device` the calling thread's CUDA device (GpuContext) and
// queues its work on that context's stream; calls that hand data back to the
// host wait for it. In a build without CUDA, Create fails and nothing else is
// reachable. Not thread-safe (ChunkStore's event loop owns it).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/optim/update_rule.hpp"
#include "common/status.hpp"

namespace pstrain::server {

// "cpu" -> -1, "gpu:N" -> N (ps-server's --device); otherwise an error.
Result<int> ParseServerDevice(const std::string& text);

// Ok when `device` is a usable CUDA device of this build and machine;
// otherwise "gpu:N needs a CUDA build" or "no CUDA device N (<why>)".
Status CheckServerDevice(int device);

class DeviceChunks {
 public:
  // Zeroed weights and `history_slots` history arrays for chunks of
  // `lengths` floats, on `device`. Errors: CheckServerDevice's, out of memory.
  static Result<std::unique_ptr<DeviceChunks>> Create(int device,
                                                      const std::vector<int64_t>& lengths,
                                                      int history_slots);
  ~DeviceChunks();
  DeviceChunks(const DeviceChunks&) = delete;
  DeviceChunks& operator=(const DeviceChunks&) = delete;

  // Array `k` of local chunk `c`: k == -1 the weights, else history slot k.
  // Upload copies host floats in (synchronously); Download copies out.
  void Upload(int c, int k, const float* host);
  void Download(int c, int k, float* host);

  // One solver step of `rule` on local chunk `c` with the host gradient
  // `grad` (copied to the device first; `grad` may be reused as soon as this
  // returns). REQUIRES: rule.has_gpu_kernel() (ChunkStore::Create checks).
  void Apply(int c, const optim::UpdateRule& rule, const optim::StepInputs& in,
             const optim::ParamHyper& param, const float* grad);

 private:
  struct State;
  explicit DeviceChunks(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace pstrain::server
