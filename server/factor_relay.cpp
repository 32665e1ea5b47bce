#include "server/factor_relay.hpp"

#include "common/ps/factor_relay.hpp"
#include "common/ps/sufficient_factors.hpp"
#include "common/transport/protocol.hpp"

namespace pstrain::server {

std::string RefuseRelay(const ShardConfig& config, const std::vector<std::string>& policies) {
  std::string chosen;
  for (const std::string& p : policies) chosen += (chosen.empty() ? "" : "+") + p;
  if (policies != std::vector<std::string>{"bsp"}) {
    return "factor relay needs plain bsp, this shard runs " + chosen;
  }
  if (config.hyper.clip_gradients >= 0) {
    return "factor relay needs no clip_gradients (the step scale waits for every shard's norm)";
  }
  if (config.averaged_workers > 0) return "factor relay does not work with host aggregation";
  if (config.device >= 0) return "factor relay needs a CPU shard (server_device cpu)";
  return "";
}

void FactorRelayStore::Install(const KeyPlacement& placement, int shard, int num_workers) {
  placement_ = placement;
  shard_ = shard;
  num_workers_ = num_workers;
  params_.assign(static_cast<size_t>(placement.num_params()),
                 std::vector<std::vector<Factors>>(
                     2, std::vector<Factors>(static_cast<size_t>(num_workers))));
}

void FactorRelayStore::Keep(const pstrain::Header& push, int worker, pstrain::DataType dtype,
                            const float* left, const float* right) {
  const pstrain::FactorShape& f = push.factors();
  const int param = placement_.chunk(push.chunks(0).id()).param;
  Factors& k = params_[static_cast<size_t>(param)][static_cast<size_t>(push.clock() % 2)]
                      [static_cast<size_t>(worker)];
  k.step = push.clock();
  k.samples = f.samples();
  k.cols = f.cols();
  k.dtype = dtype;
  const int64_t width = f.row_end() - f.row_begin();
  // 32-bit words of each frame (two 16-bit values a word in FLOAT16/BFLOAT16).
  const size_t left_words = static_cast<size_t>(FactorFrameBytes(k.dtype, f.samples() * width) / 4);
  k.left = std::make_shared<std::vector<float>>(left, left + left_words);
  k.right.reset();
  if (RelayHolder(placement_, param, worker) == shard_) {
    const size_t right_words = static_cast<size_t>(
        FactorFrameBytes(k.dtype, static_cast<int64_t>(f.samples()) * f.cols()) / 4);
    k.right = std::make_shared<std::vector<float>>(right, right + right_words);
  }
}

Status FactorRelayStore::AddTo(int param, int64_t step, Outgoing& reply, bool rights) const {
  const auto& kept = params_[static_cast<size_t>(param)][static_cast<size_t>(step % 2)];
  for (int w = 0; w < num_workers_; ++w) {
    if (kept[static_cast<size_t>(w)].step != step) {
      return Status::FailedPrecondition(
          "no factors of parameter " + std::to_string(param) + " from worker " +
          std::to_string(w) + " for step " + std::to_string(step) +
          " (it did not push them with relay: every worker must broadcast the same weights)");
    }
  }
  for (int w = 0; w < num_workers_; ++w) {
    const Factors& k = kept[static_cast<size_t>(w)];
    pstrain::RelayedFactors* r = reply.header.add_relay();
    r->set_param(static_cast<uint32_t>(param));
    r->set_worker(static_cast<uint32_t>(w));
    r->set_samples(k.samples);
    r->set_cols(k.cols);
    r->set_right(rights && k.right != nullptr);
    if (k.dtype != pstrain::FLOAT32) r->set_dtype(k.dtype);
    reply.payloads.push_back(k.left);
    if (r->right()) reply.payloads.push_back(k.right);
  }
  if (!rights) reply.header.add_rights_ahead(static_cast<uint32_t>(param));
  for (uint32_t id : ParamChunksOn(placement_, param, shard_)) reply.header.add_relayed_chunks(id);
  return Status::Ok();
}

std::vector<Outgoing> FactorRelayStore::RightsAhead(int param, int64_t step, const std::string& to,
                                                    const transport::Origin& from) const {
  if (step < 0 || param < 0 || static_cast<size_t>(param) >= params_.size()) return {};
  const auto& kept = params_[static_cast<size_t>(param)][static_cast<size_t>(step % 2)];
  std::vector<Outgoing> out;
  for (int w = 0; w < num_workers_; ++w) {
    if (RelayHolder(placement_, param, w) != shard_) continue;
    const Factors& k = kept[static_cast<size_t>(w)];
    if (k.step != step || k.right == nullptr) return {};  // not every R is in yet
    Outgoing o;
    o.peer = to;
    o.header = transport::NewHeader(from, pstrain::FACTOR_RIGHT);
    o.header.set_clock(step);
    pstrain::FactorRight* r = o.header.mutable_right();
    r->set_param(static_cast<uint32_t>(param));
    r->set_worker(static_cast<uint32_t>(w));
    r->set_samples(k.samples);
    r->set_cols(k.cols);
    if (k.dtype != pstrain::FLOAT32) r->set_dtype(k.dtype);
    o.payloads.push_back(k.right);
    out.push_back(std::move(o));
  }
  return out;
}

}  // namespace pstrain::server
