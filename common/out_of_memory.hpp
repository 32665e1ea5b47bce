// Running out of memory, the same way for host, device and pinned memory.
//
// Functions that can return a Status do (TryDeviceAlloc, TryPinnedAlloc): a
// ResourceExhausted error naming the request and what was free. Below
// interfaces that hand out raw pointers (SyncedMemory's accessors, which the
// layers call, and DeviceAlloc) the same Status travels in an
// OutOfMemoryError; the trainer's entry points and the programs' main turn it
// back into the Status (CatchOutOfMemory), so a run that does not fit ends
// with one line naming the request and exit code 1, never an abort.
#pragma once

#include <cstddef>
#include <functional>
#include <new>
#include <string>

#include "common/status.hpp"

namespace pstrain {

// An allocation that did not fit. Derives from std::bad_alloc so that code
// catching that still sees it. status() is ResourceExhausted.
class OutOfMemoryError : public std::bad_alloc {
 public:
  explicit OutOfMemoryError(Status status) : status_(std::move(status)) {}
  const Status& status() const { return status_; }
  const char* what() const noexcept override { return status_.message().c_str(); }

 private:
  Status status_;
};

// "<bytes> bytes (<x> MiB)".
std::string ByteSizeText(size_t bytes);

// "host: <free> MiB free of <total> MiB", the machine's physical memory.
std::string HostMemoryText();

// ResourceExhausted: "cannot allocate <size> of host memory (host: <free> MiB
// free of <total> MiB)".
Status HostOutOfMemory(size_t bytes);

// Runs fn; an OutOfMemoryError becomes its Status, any other std::bad_alloc a
// ResourceExhausted "out of host memory (<what>)".
Status CatchOutOfMemory(const std::function<Status()>& fn);

}  // namespace pstrain
