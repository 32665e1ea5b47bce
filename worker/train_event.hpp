// TrainEvent: what training reports and how it is printed — readable lines,
// or one JSON object a line (--json). ps-net train and ps-worker print the
// same events, made by the one training loop (worker/trainer):
//
//   train        every `display` iterations, iter = the iteration just run
//                (Caffe's "Iteration N, loss = ..."): loss (the mean of the
//                last average_loss iterations' losses, as Caffe), lr,
//                iters_per_second and images_per_second (over the window since
//                the previous train event); a parameter-server worker adds
//                pull_wait_seconds, bytes_sent, bytes_received (over the same
//                window) and staleness (iter minus the version of the weights
//                it trained on)
//   test         each evaluation: every output of the test net(s), averaged
//                over test_iter batches ("test<k>/" in front with several)
//   snapshot     path = the .caffemodel written
//   server_stats a parameter-server worker 0 at the end: version,
//                staleness_max, bad_messages
//   done         once, at the end: loss (smoothed); a parameter-server
//                worker 0 adds version
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace pstrain {

// kind: "train", "test", "snapshot", "server_stats" or "done". `values`
// holds named numbers (loss, lr, accuracy, ...); `text` a file path for
// snapshots.
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

// Caffe's smoothed training loss (Solver::UpdateSmoothedLoss): the mean of the
// last `window` losses added, or of all of them while fewer have been added.
class SmoothedLoss {
 public:
  explicit SmoothedLoss(int window) : window_(window < 1 ? 1 : static_cast<size_t>(window)) {}
  void Add(float loss);
  double value() const { return value_; }

 private:
  size_t window_;
  std::vector<float> losses_;  // a ring once full; oldest_ is the next to go
  size_t oldest_ = 0;
  double value_ = 0;
};

}  // namespace pstrain
