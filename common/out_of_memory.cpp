#include "common/out_of_memory.hpp"

#include <unistd.h>

#include <cstdio>

namespace pstrain {

std::string ByteSizeText(size_t bytes) {
  char mib[32];
  std::snprintf(mib, sizeof(mib), "%.1f", static_cast<double>(bytes) / (1 << 20));
  return std::to_string(bytes) + " bytes (" + mib + " MiB)";
}

static std::string MiB(double bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.0f MiB", bytes / (1 << 20));
  return text;
}

std::string HostMemoryText() {
  const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
  const double free_bytes = page * static_cast<double>(sysconf(_SC_AVPHYS_PAGES));
  const double total_bytes = page * static_cast<double>(sysconf(_SC_PHYS_PAGES));
  return "host: " + MiB(free_bytes) + " free of " + MiB(total_bytes);
}

Status HostOutOfMemory(size_t bytes) {
  return Status::ResourceExhausted("cannot allocate " + ByteSizeText(bytes) + " of host memory (" +
                                   HostMemoryText() + ")");
}

Status CatchOutOfMemory(const std::function<Status()>& fn) {
  try {
    return fn();
  } catch (const OutOfMemoryError& e) {
    return e.status();
  } catch (const std::bad_alloc& e) {
    return Status::ResourceExhausted(std::string("out of host memory (") + e.what() + ")");
  }
}

}  // namespace pstrain
