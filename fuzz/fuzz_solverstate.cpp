// Fuzz target "solverstate": the two resume files through their loaders.
//   byte 0 even: a Caffe .solverstate (iteration, solver history, learned_net)
//                through Trainer::Create with resume_from, on the small net of
//                fuzz_util.hpp, solver type by byte 0 (SGD, Adam, AdaDelta,
//                RMSProp); a trainer that accepts it takes one step.
//   byte 0 odd:  a shard checkpoint (<prefix>.shard<k>.state, pstrain.ShardState)
//                through ShardState::Restore with the set-up of
//                fuzz/message_input.hpp (byte 0 >> 1); a restored shard then
//                answers a HELLO and a PULL of every worker.
// The rest of the input is the file. Property: each loader accepts or refuses
// with an error (ASan/UBSan watch for the rest); a restored shard's answers
// are sendable.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/proto_io.hpp"
#include "fuzz/fuzz_util.hpp"
#include "fuzz/message_input.hpp"
#include "server/shard_state.hpp"
#include "worker/trainer.hpp"

namespace {

void CaffeSolverState(uint8_t setup, const std::string& path) {
  static const char* kTypes[] = {"SGD", "Adam", "AdaDelta", "RMSProp"};
  caffe::SolverParameter solver;
  if (!pstrain::ParseTextProto(pstrain::fuzz::kSmallNet, "small net", solver.mutable_net_param())
           .ok()) {
    pstrain::fuzz::Fail("fuzz_solverstate", "the small net does not parse");
  }
  solver.set_type(kTypes[(setup >> 1) % 4]);
  solver.set_base_lr(0.01f);
  solver.set_momentum(0.9f);
  solver.set_lr_policy("fixed");
  solver.set_max_iter(1000);
  solver.set_random_seed(3);
  pstrain::TrainerOptions options;
  options.engine = pstrain::Engine::kReference;
  options.resume_from = path;
  options.run_tests = false;
  options.write_snapshots = false;
  auto trainer = pstrain::Trainer::Create(solver, "fuzz_solver.prototxt", options);
  if (!trainer.ok()) return;
  (void)trainer.value()->Step(1);
}

void ShardState(uint8_t setup, const std::string& path) {
  pstrain::server::ShardConfig config = pstrain::fuzz::SetupConfig(setup >> 1);
  auto shard = pstrain::server::ShardState::Restore(config, path);
  if (!shard.ok()) return;
  pstrain::server::ShardState& server = shard.value();
  server.log = [](const std::string&) {};
  (void)server.Stats();
  const auto now = pstrain::server::ShardState::TimePoint{} + std::chrono::hours(1);
  for (int w = 0; w < config.num_workers; ++w) {
    const pstrain::transport::Origin worker{pstrain::WORKER, w, config.job_key};
    for (const pstrain::Header& h :
         {pstrain::transport::HelloHeader(worker, config.num_workers),
          pstrain::transport::PullHeader(worker, server.clocks().min())}) {
      pstrain::transport::InMessage message;
      message.header = h;
      if (!pstrain::transport::Validate(message, server.RulesFor(h)).ok()) continue;
      for (const auto& out : server.Handle({"peer", h, {}, {}}, now)) {
        if (pstrain::transport::PayloadFrames(out.header) != out.payloads.size()) {
          pstrain::fuzz::Fail("fuzz_solverstate", "a restored shard's answer is not sendable");
        }
      }
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t setup = data[0];
  const std::string path = pstrain::fuzz::ScratchFile(data + 1, size - 1, ".state");
  if (setup % 2 == 0) {
    CaffeSolverState(setup, path);
  } else {
    ShardState(setup, path);
  }
  return 0;
}
