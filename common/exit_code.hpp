// Exit codes: the one mapping from a Status to a program's exit status, shared
// by every PSTRAIN program (ps-net, ps-data, ps-worker, ps-server) and read by
// the orchestrator (python/pstrain/exitcodes.py mirrors these numbers).
//
//   0   done
//   1   a permanent failure: bad input, a missing or corrupt file, a bug,
//       out of memory; running it again fails the same way
//   2   bad command-line arguments (the program's flags; decided by main,
//       before any Status exists)
//   3   training diverged (a loss that is not finite)
//   75  a retryable failure (EX_TEMPFAIL): a peer gone or silent past its
//       deadline; running it again may succeed
//
// A process killed by a signal has no exit code; the orchestrator treats that
// as retryable too.
#pragma once

#include <functional>
#include <string>

#include "common/status.hpp"

namespace pstrain {

enum ExitCode : int {
  kExitOk = 0,
  kExitFailure = 1,
  kExitUsage = 2,
  kExitDiverged = 3,
  kExitRetryable = 75,
};

// 0 for ok; 75 for Unavailable and DeadlineExceeded; 3 for Diverged; 1 for
// every other code. Never kExitUsage: bad flags are found before a Status.
int ExitCodeFor(const Status& status);

// Prints "<program>: <message>" on stderr for a failed status and returns
// ExitCodeFor(status); returns 0 and prints nothing for ok. `program` names
// the process ("ps-worker 3").
int ExitWith(const Status& status, const std::string& program);

// Runs a program's body and returns its exit code; running out of memory
// anywhere in it (an OutOfMemoryError or std::bad_alloc escaping) ends it as
// ExitWith(that ResourceExhausted status, program) does: one line, exit 1.
int ExitOnOutOfMemory(const std::string& program, const std::function<int()>& body);

}  // namespace pstrain
