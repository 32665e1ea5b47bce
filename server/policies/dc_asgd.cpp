// dc_lambda (ssp/asp; DC-ASGD, Zheng et al. 2017, server/update_methods.hpp):
// a wrapper that keeps the buffers it last served each worker and compensates
// each pushed chunk for the weights' change since (DelayCompensate, or
// DelayCompensateAdaptive with dc_adaptive) before the inner policy applies it.
#include <memory>
#include <span>
#include <vector>

#include "server/consistency_policy.hpp"
#include "server/update_methods.hpp"

namespace pstrain::server {
namespace {

class DcAsgdPolicy : public PolicyWrapper {
 public:
  using PolicyWrapper::PolicyWrapper;

  void Install() override {
    inner_->Install();
    const ChunkStore& store = core_.store();
    served_.assign(static_cast<size_t>(core_.config.num_workers),
                   std::vector<std::shared_ptr<const std::vector<float>>>(
                       static_cast<size_t>(store.num_chunks())));
    if (core_.config.methods.dc_adaptive) {
      mean_square_.clear();
      for (uint32_t id : store.chunk_ids()) {
        mean_square_.emplace_back(static_cast<size_t>(store.length(id)), 0.f);
      }
    }
  }
  void OnGradient(ChunkGradient& g) override {
    Compensate(g);
    inner_->OnGradient(g);
  }
  void Served(int w, int local, const std::shared_ptr<const std::vector<float>>& weights) override {
    served_[static_cast<size_t>(w)][static_cast<size_t>(local)] = weights;
    inner_->Served(w, local, weights);
  }

 private:
  void Compensate(ChunkGradient& g) {
    const auto& pulled = served_[static_cast<size_t>(g.worker)][static_cast<size_t>(g.local)];
    if (!pulled) return;  // never served since (re)start: nothing to compensate against
    const std::span<const float> now = core_.store().weights(g.id);
    const UpdateMethods& m = core_.config.methods;
    if (m.dc_adaptive) {
      DelayCompensateAdaptive(g.Values(), now.data(), pulled->data(),
                              mean_square_[static_cast<size_t>(g.local)].data(), now.size(),
                              m.dc_lambda, m.dc_momentum, m.dc_epsilon);
    } else {
      DelayCompensate(g.Values(), now.data(), pulled->data(), now.size(), m.dc_lambda);
    }
  }

  // [worker][local chunk]: the buffer last served; [local]: mean squares (adaptive).
  std::vector<std::vector<std::shared_ptr<const std::vector<float>>>> served_;
  std::vector<std::vector<float>> mean_square_;
};

}  // namespace

PSTRAIN_REGISTER_POLICY(PolicyRegistry::Entry{
    .name = "dc_asgd",
    .rank = 110,
    .wants = [](const ShardConfig& c) { return c.methods.delay_compensation(); },
    .validate = {},
    .base = {},
    .wrapper =
        [](ShardCore& core, std::unique_ptr<ConsistencyPolicy> inner) {
          return std::make_unique<DcAsgdPolicy>(core, std::move(inner));
        }});

}  // namespace pstrain::server
