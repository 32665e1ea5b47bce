// ElasticExchange: the worker's side of EASGD (Zhang, Choromanska, LeCun 2015)
// and periodic model averaging (local SGD). The worker trains its own copy of
// the weights with the local solver and every `period` iterations exchanges
// with the servers, which hold the center weights and add what is pushed to
// them (ps-server --elastic). Exchange e (after iterations [e*period,
// (e+1)*period)) uses clock e:
//
//   easgd    pull the center c (clock e); d = alpha * (x - c); x -= d; push d:
//            the servers do c += sum of the workers' d (bsp: once all W are in).
//   average  push d = (x - c_prev) / W, where c_prev is the center this worker
//            last pulled; pull the new center (clock e + 1) and train on it:
//            in bsp c becomes the mean of the workers' weights.
//
// Used by PsWorker, on its trainer's thread only.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "common/status.hpp"
#include "worker/ps/ps_client.hpp"

namespace pstrain {

struct ElasticOptions {
  enum class Method { kNone, kEasgd, kAverage };
  Method method = Method::kNone;
  int period = 1;      // iterations between two exchanges (tau)
  float alpha = 0.1f;  // easgd: the moving rate
};

// "none", "easgd", "average".
Result<ElasticOptions::Method> ParseElasticMethod(const std::string& name);

class ElasticExchange {
 public:
  // `blobs`: the PsClient's parameters' blobs, in its parameter order.
  // `on_center(version, checkpoint_files)` is called while the blobs hold a
  // freshly pulled center (worker 0 writes a checkpoint from it).
  ElasticExchange(const ElasticOptions& options, PsClient* client, std::vector<Blob*> blobs,
                  int world_size,
                  std::function<Status(int64_t, const std::vector<std::string>&)> on_center);

  // The blobs hold the center just pulled at the start: remember it.
  void Started();
  // Exchange `e` (see above). Leaves the blobs with the weights to train on next.
  Status Exchange(int64_t e);

 private:
  Status WaitCenter();

  ElasticOptions options_;
  PsClient* client_;
  std::vector<Blob*> blobs_;
  std::vector<int> ids_;  // 0..n-1
  int world_size_;
  std::function<Status(int64_t, const std::vector<std::string>&)> on_center_;
  std::vector<std::vector<float>> local_;   // easgd: x before the pull
  std::vector<std::vector<float>> center_;  // average: the center last pulled
  std::vector<std::vector<float>> delta_;   // what is pushed
};

}  // namespace pstrain
