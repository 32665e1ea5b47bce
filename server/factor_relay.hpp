// FactorRelayStore: a bsp shard's copy of the sufficient factors workers
// pushed with FactorShape.relay (sufficient-factor broadcasting), kept so
// that the PULL_REPLYs for iteration t + 1 can carry every worker's factors
// of step t for a broadcast weight instead of its weights
// (common/ps/factor_relay.hpp; docs/wire-protocol.md, "Factor relay").
//
// Per (parameter, worker) it keeps L as the worker pushed it here, and R only
// where this shard is the worker's holder for that parameter (RelayHolder).
// Two steps are kept: in bsp a worker may push step t + 1 (its reply for
// t + 1 went out) before a slower worker's pull for t + 1 is answered, never
// step t + 2 before that. Kept buffers are shared with the replies that carry
// them (a later step gets new buffers), so nothing is copied to send them.
// The shard loop's thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/ps/key_placement.hpp"
#include "common/status.hpp"
#include "common/transport/protocol.hpp"
#include "proto/pstrain.pb.h"
#include "server/shard_config.hpp"
#include "server/shard_messages.hpp"

namespace pstrain::server {

// Why a shard serving `config` with the policies `policies` (base first)
// cannot relay factors, "" when it can: the relay reproduces plain bsp steps
// only (one rank-ordered sum of every worker, no clipping, no host
// aggregation, a CPU shard).
std::string RefuseRelay(const ShardConfig& config, const std::vector<std::string>& policies);

class FactorRelayStore {
 public:
  // The store of `shard`'s relays under `placement` (copied) for `num_workers`.
  void Install(const KeyPlacement& placement, int shard, int num_workers);
  bool installed() const { return !params_.empty(); }

  // Keeps worker `worker`'s factors of step push.clock() (a PUSH with
  // factors that ShardState accepted; left and right its two frames as they
  // travelled and transport::Validate checked them, in `dtype`: float32
  // values, or 16-bit words for FLOAT16 and BFLOAT16). They are kept, and
  // relayed, byte for byte in `dtype`, never re-encoded.
  void Keep(const pstrain::Header& push, int worker, pstrain::DataType dtype, const float* left,
            const float* right);

  // Appends to `reply` the relay of parameter `param`'s step `step`: one
  // RelayedFactors per worker with its frames, in worker order, and the
  // param's chunks on this shard as relayed. Error (nothing appended): a
  // worker's factors of that step are not here (it pushed the weight densely
  // or without relay), naming the worker.
  // rights false: the entries carry no R (it went ahead in FACTOR_RIGHTs,
  // RightsAhead) and the reply lists `param` in rights_ahead.
  Status AddTo(int param, int64_t step, Outgoing& reply, bool rights = true) const;

  // R pushed once (ps-worker --factor-right holder): one FACTOR_RIGHT for
  // `to` per worker whose R of `param`'s step `step` this shard holds (its
  // RelayHolder), with the kept frame; empty (nothing sent yet) until every
  // one of them is kept. The kept bytes are shared, not copied.
  std::vector<Outgoing> RightsAhead(int param, int64_t step, const std::string& to,
                                    const transport::Origin& from) const;

 private:
  struct Factors {
    int64_t step = -1;
    uint32_t samples = 0;
    uint32_t cols = 0;
    pstrain::DataType dtype = pstrain::FLOAT32;  // of the frames, as pushed
    std::shared_ptr<std::vector<float>> left;    // the frames' 32-bit words
    std::shared_ptr<std::vector<float>> right;  // null unless this shard holds the worker's R
  };
  // [param][step % 2][worker]
  std::vector<std::vector<std::vector<Factors>>> params_;
  KeyPlacement placement_;
  int shard_ = 0;
  int num_workers_ = 0;
};

}  // namespace pstrain::server
