// Training events (worker/train_event.hpp) as Caffe's solver logs them, in
// glog's format (common/glog_line.hpp), so that Caffe's
// tools/extra/parse_log.py reads `ps-net train`'s output as it reads
// `caffe train`'s:
//
//   I... solver.cpp:279] Solving LeNet                 (Start: the log's start time)
//   I... solver.cpp:330] Iteration 0, Testing net (#0)
//   I... solver.cpp:397]     Test net output #0: accuracy = 0.1
//   I... solver.cpp:218] Iteration 10 (28.8 iter/s, 0.347s/10 iters), loss = 0.98
//   I... solver.cpp:237]     Train net output #0: loss = 0.98 (* 1 = 0.98 loss)
//   I... sgd_solver.cpp:105] Iteration 10, lr = 0.01
//   I... solver.cpp:464] Snapshotting to binary proto file x_iter_10.caffemodel
//   I... solver.cpp:310] Optimization Done.
//
// The orchestrator's logs/<role>-<rank>.caffe.log (python/pstrain/caffelog.py)
// writes the same lines for each worker. Not thread-safe: one writer.
#pragma once

#include <string>
#include <vector>

#include "worker/train_event.hpp"

namespace pstrain {

class CaffeLog {
 public:
  // The lines that open a run: "Solving <net>" and the learning rate policy.
  std::vector<std::string> Start(const std::string& net_name, const std::string& lr_policy) const;
  // The lines for one event, each with its glog prefix (I, the time now).
  std::vector<std::string> Lines(const TrainEvent& event);

 private:
  int last_train_iter_ = -1;
};

}  // namespace pstrain
