// TrainEvent: what training reports (ps-net train, ps-worker) and how it is
// printed — readable lines or one JSON object a line (--json).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace pstrain {

// kind: "train" (every display interval), "test" (each evaluation),
// "snapshot", "server_stats" or "done". `values` holds named numbers (loss,
// lr, accuracy, ...); `text` a file path for snapshots.
struct TrainEvent {
  std::string kind;
  int iter = 0;
  std::vector<std::pair<std::string, double>> values;
  std::string text;
};

// One line without the newline. JSON: {"event":kind,"iter":N,<values>,"path":text}
// plus the `extra` fields given (e.g. role and rank).
std::string FormatEvent(const TrainEvent& event, bool json,
                        const std::vector<std::pair<std::string, std::string>>& extra = {});

}  // namespace pstrain
