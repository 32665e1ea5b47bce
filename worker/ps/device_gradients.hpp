// DeviceGradients: wait-free backprop for a worker on the GPU engine.
// After a layer's backward has been queued on the compute stream,
// Start(ids) queues copies of those parameters' gradients device-to-host on
// GpuContext's copy stream into pinned host buffers, ordered after the
// backward by an event; Drain hands each group to `push` once its copy has
// finished (in Start order) while the GPU goes on with the backward pass.
//
// Not thread-safe: the worker's thread (whose GpuContext runs the net) owns
// it. In a build without CUDA, Create fails.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "common/blob.hpp"
#include "common/status.hpp"

namespace pstrain {

class DeviceGradients {
 public:
  // Push callback: the parameter ids of one group and their host gradients.
  using PushFn =
      std::function<Status(const std::vector<int>& ids, const std::vector<const float*>& diffs)>;

  // One pinned buffer per blob (blobs[id]'s diff count() floats); none for a
  // null blob (a weight pushed as sufficient factors), which Start must not name.
  static Result<std::unique_ptr<DeviceGradients>> Create(const std::vector<Blob*>& blobs);
  ~DeviceGradients();
  DeviceGradients(const DeviceGradients&) = delete;
  DeviceGradients& operator=(const DeviceGradients&) = delete;

  // Queues the copies of blobs[ids]'s GPU diffs after the work queued so far
  // on the compute stream. REQUIRES: ids non-empty, each id started at most
  // once between two full drains.
  void Start(const std::vector<int>& ids);
  // Pushes the started groups whose copies have finished, oldest first,
  // stopping at the first unfinished one; with `wait`, waits for and pushes
  // all of them. Returns push's first error (the rest stay queued).
  Status Drain(bool wait, const PushFn& push);

 private:
  struct State;
  explicit DeviceGradients(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace pstrain
