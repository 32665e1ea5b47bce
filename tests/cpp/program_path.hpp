#pragma once
// Where tests find PSTrain's programs: the folder that holds the test binary
// itself when the program is there (a build moved elsewhere, such as the packed
// build of bench/gpu_bundle.sh), else the build tree's bin/.

#include <unistd.h>

#include <string>

namespace pstrain {

inline std::string ProgramDir() {
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n > 0) {
    std::string dir(self, static_cast<size_t>(n));
    dir.erase(dir.rfind('/'));
    if (::access((dir + "/ps-server").c_str(), X_OK) == 0) return dir;
  }
  return PSTRAIN_BINARY_DIR "/bin";
}

inline std::string ProgramPath(const std::string& name) { return ProgramDir() + "/" + name; }

}  // namespace pstrain
