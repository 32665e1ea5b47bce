#include "common/exit_code.hpp"

#include <cstdio>

#include "common/out_of_memory.hpp"

namespace pstrain {

int ExitCodeFor(const Status& status) {
  switch (status.code()) {
    case StatusCode::kOk:
      return kExitOk;
    case StatusCode::kDiverged:
      return kExitDiverged;
    case StatusCode::kUnavailable:
    case StatusCode::kDeadlineExceeded:
      return kExitRetryable;
    case StatusCode::kInvalidArgument:
    case StatusCode::kNotFound:
    case StatusCode::kCorruption:
    case StatusCode::kIOError:
    case StatusCode::kFailedPrecondition:
    case StatusCode::kResourceExhausted:
    case StatusCode::kUnknown:
      return kExitFailure;
  }
  return kExitFailure;
}

int ExitWith(const Status& status, const std::string& program) {
  if (!status.ok()) std::fprintf(stderr, "%s: %s\n", program.c_str(), status.message().c_str());
  return ExitCodeFor(status);
}

int ExitOnOutOfMemory(const std::string& program, const std::function<int()>& body) {
  int code = kExitOk;
  const Status status = CatchOutOfMemory([&] {
    code = body();
    return Status::Ok();
  });
  return status.ok() ? code : ExitWith(status, program);
}

}  // namespace pstrain
