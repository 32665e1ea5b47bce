#include "common/transport/malloc_tuning.hpp"

#include <malloc.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

namespace pstrain::transport {

Status TuneMallocForLargeFrames(size_t keep_free_bytes) {
  // A fixed threshold also turns off glibc's own threshold adjustment.
  if (mallopt(M_MMAP_THRESHOLD, static_cast<int>(kLargestReusedFrameBytes)) != 1) {
    return Status::InvalidArgument("mallopt(M_MMAP_THRESHOLD) refused " +
                                   std::to_string(kLargestReusedFrameBytes));
  }
  int keep = keep_free_bytes > INT_MAX ? INT_MAX : static_cast<int>(keep_free_bytes);
  if (mallopt(M_TRIM_THRESHOLD, keep) != 1) {
    return Status::InvalidArgument("mallopt(M_TRIM_THRESHOLD) refused " + std::to_string(keep));
  }
  return Status::Ok();
}

void ReexecWithHugePageHeap(char** argv) {
  static constexpr char kTunable[] = "glibc.malloc.hugetlb=";
  const char* off = std::getenv("PSTRAIN_MALLOC_HUGETLB");
  if (off != nullptr && std::strcmp(off, "0") == 0) return;
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if (tunables != nullptr && std::strstr(tunables, kTunable) != nullptr) return;  // set (by us)
  std::string mode;
  std::getline(std::ifstream("/sys/kernel/mm/transparent_hugepage/enabled"), mode);
  if (mode.empty() || mode.find("[never]") != std::string::npos) return;
  std::string value = tunables != nullptr && *tunables != '\0' ? std::string(tunables) + ":" : "";
  value += std::string(kTunable) + "1";
  if (setenv("GLIBC_TUNABLES", value.c_str(), 1) != 0) return;
  // The program's own path, not /proc/self/exe: the process name (comm,
  // what ps and /proc/PID/status show) comes from the file name exec'd.
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return;
  self[n] = '\0';
  execv(self, argv);
  // exec failed: go on without (the variable stays, so no second attempt).
}

}  // namespace pstrain::transport
