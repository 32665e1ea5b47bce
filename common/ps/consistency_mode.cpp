#include "common/ps/consistency_mode.hpp"

namespace pstrain {

const char* ModeName(ConsistencyMode mode) {
  switch (mode) {
    case ConsistencyMode::kBsp:
      return "bsp";
    case ConsistencyMode::kSsp:
      return "ssp";
    case ConsistencyMode::kAsp:
      return "asp";
  }
  return "?";
}

Result<ConsistencyMode> ParseConsistencyMode(const std::string& name) {
  for (ConsistencyMode mode :
       {ConsistencyMode::kBsp, ConsistencyMode::kSsp, ConsistencyMode::kAsp}) {
    if (name == ModeName(mode)) return mode;
  }
  return Status::Error("mode \"" + name + "\" is not one of bsp, ssp, asp");
}

}  // namespace pstrain
