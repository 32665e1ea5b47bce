// FactorBroadcast: the worker's side of sufficient-factor broadcasting
// (Poseidon; docs/architecture.md, "Sufficient factors"). For the fc weights
// it broadcasts, the worker keeps a replica (common/ps/factor_replica.hpp)
// and its pulls ask the shards for every worker's factors of the step
// instead of the weights; the replica applies that step exactly as each
// shard did, bit for bit, and the blob gets the replica's values.
//
// Per pull for iteration t (PsClient calls BeginPull, AddToPull per shard,
// Accept per PULL_REPLY, Finish once every reply is in):
//   * the replica holds version t - 1 (it saw the pull for t - 1): the pull
//     asks for the weights as factors (Header.broadcast); every
//     `verify_interval` iterations it also asks for their weights and
//     history (history_params), and Finish compares the stepped replica with
//     them bit for bit -- a difference is an error when `strict`, otherwise a
//     warning (on_notice) and the shards' values replace the replica's;
//   * otherwise (the first pull of this process: a fresh start or a
//     restarted worker, at any clock) the pull asks for the weights and
//     their history, which become the replica.
// Used by the training loop's thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/blob.hpp"
#include "common/optim/solver_hyper.hpp"
#include "common/ps/factor_replica.hpp"
#include "common/ps/key_placement.hpp"
#include "common/status.hpp"
#include "common/transport/message.hpp"
#include "proto/pstrain.pb.h"

namespace pstrain {

struct FactorBroadcastOptions {
  int num_workers = 1;
  int64_t verify_interval = 0;  // > 0: every this many iterations (t % n == 0)
  bool strict = false;          // a replica that differs from the shards is an error
  // R pushed once (PsClientOptions::factor_right_holder): every pull for
  // t >= 1 asks the shards for the R's of step t - 1 ahead (rights_ahead); the
  // relay's entries then carry none, AcceptRight takes them.
  bool rights_ahead = false;
  std::function<void(const std::string&)> on_notice;  // warnings
};

class FactorBroadcast {
 public:
  struct Weight {
    int param = 0;
    Blob* blob = nullptr;  // rows x cols; its data gets the replica's values
    int64_t cols = 0;
  };
  // param_hyper: every PS parameter's lr_mult/decay_mult, in order; hyper:
  // the solver's (as the shards run it). Errors: FactorReplica::Create's.
  static Result<std::unique_ptr<FactorBroadcast>> Create(
      const KeyPlacement& placement, std::vector<Weight> weights,
      const std::vector<optim::ParamHyper>& param_hyper, const optim::SolverHyper& hyper,
      FactorBroadcastOptions options);

  // A pull for iteration `clock` starts.
  void BeginPull(int64_t clock);
  // Sets the broadcast / history fields of the PULL to one shard.
  void AddToPull(pstrain::Header* pull) const;
  // A PULL_REPLY from `shard` (validated). Error, naming the shard: factors
  // or history this pull did not ask for.
  Status Accept(int shard, const std::string& server, const transport::InMessage& reply);
  // A FACTOR_RIGHT (validated: from the worker's holder) of the pull in
  // flight's step clock - 1, with rights_ahead: that worker's R for the
  // replica's step. One of another step, or a pull that takes no factors:
  // nothing to do (it was only forwarded).
  Status AcceptRight(const std::string& server, const transport::InMessage& right);
  // Every reply of the pull is in: the replica steps (or starts) and the
  // blobs get its values. Error: `strict` and a difference from the shards.
  Status Finish();

  // Parameter `param` is broadcast (its factored pushes carry relay).
  bool Broadcasts(int param) const { return replica_.Broadcast(param); }
  // Values compared with the shards' and found different, over the run.
  int64_t mismatches() const { return mismatches_; }
  int64_t verifications() const { return verifications_; }

 private:
  struct ShardRelay {  // one shard's relay of one weight
    int param = 0;
    int shard = 0;
    float scale = 0.f;
    std::vector<std::vector<float>> left;  // by worker
  };
  FactorBroadcast(FactorReplica replica, std::vector<Weight> weights,
                  FactorBroadcastOptions options)
      : replica_(std::move(replica)), weights_(std::move(weights)), options_(std::move(options)) {}
  bool Broadcast(int param) const { return replica_.Broadcast(param); }
  // The index in weights_ of `param`'s weight when its rows have `cols` values; otherwise
  // an error opening with `what` (the sender and what it sent of the parameter) for a
  // weight this worker does not broadcast and with `what_rows` for rows that differ.
  Result<size_t> WeightIndex(int param, uint32_t cols, const std::string& what,
                               const std::string& what_rows) const;

  FactorReplica replica_;
  std::vector<Weight> weights_;
  FactorBroadcastOptions options_;
  KeyPlacement placement_;
  int64_t synced_ = -1;  // the replica holds the weights of this iteration
  // The pull in flight.
  int64_t clock_ = 0;
  bool relay_ = false;    // asks for factors
  bool dense_ = false;    // asks for weights and history
  std::vector<ShardRelay> relays_;
  std::vector<std::vector<std::vector<float>>> rights_;  // [weight index][worker]
  std::vector<std::pair<uint32_t, std::vector<float>>> dense_weights_;
  std::vector<std::pair<std::pair<uint32_t, int>, std::vector<float>>> dense_history_;
  int64_t mismatches_ = 0;
  int64_t verifications_ = 0;
};

}  // namespace pstrain
