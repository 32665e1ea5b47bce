#include "common/transport/malloc_tuning.hpp"

#include <malloc.h>

#include <climits>
#include <string>

namespace pstrain::transport {

Status TuneMallocForLargeFrames(size_t keep_free_bytes) {
  // A fixed threshold also turns off glibc's own threshold adjustment.
  if (mallopt(M_MMAP_THRESHOLD, static_cast<int>(kLargestReusedFrameBytes)) != 1) {
    return Status::Error("mallopt(M_MMAP_THRESHOLD) refused " +
                         std::to_string(kLargestReusedFrameBytes));
  }
  int keep = keep_free_bytes > INT_MAX ? INT_MAX : static_cast<int>(keep_free_bytes);
  if (mallopt(M_TRIM_THRESHOLD, keep) != 1) {
    return Status::Error("mallopt(M_TRIM_THRESHOLD) refused " + std::to_string(keep));
  }
  return Status::Ok();
}

}  // namespace pstrain::transport
