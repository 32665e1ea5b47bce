// fuzz_make_seeds <fuzz folder>: writes the seed corpora of the binary fuzz
// targets with the project's own encoders, so every seed is what real
// programs produce:
//   corpus/message/      worker sessions built with transport's header builders
//                        (HELLO, INIT_PUSH, PULL, PUSH, HEARTBEAT, STATS,
//                        SHUTDOWN, GATE to a --step-gate shard; NORM_PARTIAL
//                        from another shard; fp16 and bf16 pushes with 16-bit
//                        pulls; pushes of sufficient factors (float32 and, with
//                        16-bit pushes, 16-bit), with the relay
//                        and history pulls of factor broadcasting, with R
//                        pushed once (pushes without R, FACTOR_RIGHT); pushes
//                        under host aggregation), in the framing
//                        fuzz/message_input.hpp reads
//   corpus/datum/        Datum records as ps-data writes them (uint8, float)
//   corpus/caffemodel/   the small net's .caffemodel (Net::WriteCaffemodel)
//   corpus/solverstate/  Trainer snapshots (.solverstate) for SGD and Adam,
//                        and a shard checkpoint (ShardState::WriteCheckpoint)
// The text prototxt corpus is configs/nets/*.prototxt, copied by scripts/fuzz.sh.
// Run by hand after a format change; the output is committed.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/proto_io.hpp"
#include "common/ps/factor_relay.hpp"
#include "common/ps/key_placement.hpp"
#include "common/ps/sufficient_factors.hpp"
#include "common/transport/gradient_codec.hpp"
#include "common/transport/protocol.hpp"
#include "fuzz/fuzz_util.hpp"
#include "fuzz/message_input.hpp"
#include "server/shard_state.hpp"
#include "worker/trainer.hpp"

namespace {

namespace fs = std::filesystem;
using pstrain::transport::Origin;

void Write(const fs::path& path, const std::string& bytes) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << bytes;
  std::printf("%s (%zu bytes)\n", path.c_str(), bytes.size());
}

std::string Frame(const pstrain::Header& h) { return h.SerializeAsString(); }
std::string Floats(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

// How a seed's workers push and pull (the seeds below each set one).
struct Wire {
  pstrain::DataType push = pstrain::FLOAT32;  // PUSH dtype (transport.compression)
  pstrain::DataType pull = pstrain::FLOAT32;  // HELLO pull_dtype (transport.pull_compression)
  // Parameter w[2x3] pushed as sufficient factors (2 samples) instead of
  // values; with `relay`, kept for factor broadcasting, and every pull after
  // the first asks for w's factors (PULL broadcast), the first for its
  // history (PULL history_params).
  bool factors = false;
  bool relay = false;
  // With relay, R pushed once (ps-worker --factor-right holder): a worker's
  // push to a shard that is not its holder carries L alone and the shard's
  // forwarder (worker shard % workers) forwards the R in a FACTOR_RIGHT; every
  // pull after the first asks for the R's ahead (PULL rights_ahead).
  bool forward = false;
};

// One worker's PUSH of every chunk of `mine` at `clock`, as PsClient sends it.
std::string PushFrames(const pstrain::KeyPlacement& placement, const std::vector<uint32_t>& mine,
                       const Origin& worker, int64_t clock, const Wire& wire, int shard,
                       int workers) {
  pstrain::Header push = pstrain::transport::PushHeader(worker, clock, 0.75);
  std::vector<std::string> frames = {""};
  std::vector<uint32_t> dense;
  std::vector<uint32_t> factored;
  for (uint32_t id : mine) {
    (wire.factors && placement.chunk(id).param == 0 ? factored : dense).push_back(id);
  }
  std::string out;
  if (!factored.empty()) {  // w = L^T R, L: 2 samples x 2 rows, R: 2 samples x 3 cols
    pstrain::Header h = pstrain::transport::PushHeader(worker, clock, -1.0);
    pstrain::FactorShape* shape = h.mutable_factors();
    int64_t first = 2, last = -1;
    for (uint32_t id : factored) {
      const pstrain::Chunk& c = placement.chunk(id);
      pstrain::transport::AddChunk(h, id, static_cast<uint64_t>(c.length));
      first = std::min<int64_t>(first, c.offset / 3);
      last = std::max<int64_t>(last, (c.offset + c.length - 1) / 3);
    }
    shape->set_samples(2);
    shape->set_row_begin(static_cast<uint32_t>(first));
    shape->set_row_end(static_cast<uint32_t>(last + 1));
    shape->set_cols(3);
    if (wire.relay) shape->set_relay(true);
    std::vector<float> left;
    for (int s = 0; s < 2; ++s) {
      for (int64_t r = first; r <= last; ++r) left.push_back(0.25f * (s + 1) - 0.5f * r);
    }
    const std::vector<float> right = {1.f, -2.f, 0.5f, 0.25f, 3.f, -1.f};
    // 16-bit pushes carry the factors in 16 bits too (PsClient::PushFactors).
    const pstrain::DataType dtype = pstrain::FactorDtype(wire.push);
    if (dtype != pstrain::FLOAT32) h.set_dtype(dtype);
    std::vector<float> left_words, right_words;
    pstrain::EncodeFactors(dtype, left.data(), left.size(), &left_words);
    pstrain::EncodeFactors(dtype, right.data(), right.size(), &right_words);
    if (wire.forward && pstrain::RelayHolder(placement, 0, worker.rank) != shard) {
      shape->set_right_forwarded(true);
      pstrain::fuzz::AppendMessage({Frame(h), Floats(left_words)}, &out);
      // The shard's forwarder has the R from the holder's answer to its pull.
      pstrain::Header f = pstrain::transport::NewHeader(
          {pstrain::WORKER, shard % workers, worker.job_key}, pstrain::FACTOR_RIGHT);
      f.set_clock(clock);
      pstrain::FactorRight* r = f.mutable_right();
      r->set_param(0);
      r->set_worker(static_cast<uint32_t>(worker.rank));
      r->set_samples(2);
      r->set_cols(3);
      if (dtype != pstrain::FLOAT32) r->set_dtype(dtype);
      pstrain::fuzz::AppendMessage({Frame(f), Floats(right_words)}, &out);
    } else {
      pstrain::fuzz::AppendMessage({Frame(h), Floats(left_words), Floats(right_words)}, &out);
    }
  }
  if (dense.empty()) return out;
  if (wire.push != pstrain::FLOAT32) push.set_dtype(wire.push);
  for (uint32_t id : dense) {
    const pstrain::Chunk& c = placement.chunk(id);
    pstrain::transport::AddChunk(push, id, static_cast<uint64_t>(c.length));
    std::vector<float> values(static_cast<size_t>(c.length), 0.125f * (worker.rank + 1));
    if (wire.push == pstrain::FLOAT32) {
      frames.push_back(Floats(values));
    } else {
      std::vector<float> words;
      (void)pstrain::transport::EncodeHalves(wire.push, values.data(), values.size(), &words);
      frames.push_back(Floats(words));
    }
  }
  frames[0] = Frame(push);
  pstrain::fuzz::AppendMessage(frames, &out);
  return out;
}

// A session of worker `w` with the shard of `setup`: HELLO, (worker 0)
// INIT_PUSH of the two-parameter net w[2x3], b[2], (gate >= 0) a GATE to
// `gate`, then `steps` rounds of PULL and PUSH of every chunk this shard
// holds, then `tail` (STATS, SHUTDOWN...; a GATE there asks for gate 1).
std::string Session(uint8_t setup, int steps, const std::vector<pstrain::MessageType>& tail,
                    int64_t gate = -1, const Wire& wire = {}) {
  const pstrain::server::ShardConfig config = pstrain::fuzz::SetupConfig(setup);
  auto placement =
      pstrain::KeyPlacement::Create({6, 2}, config.num_shards, config.chunk_bytes).value();
  const std::vector<uint32_t>& mine = placement.shard_chunks(config.shard);
  std::string out(1, static_cast<char>(setup));
  for (int w = 0; w < config.num_workers; ++w) {
    Origin worker{pstrain::WORKER, w, config.job_key};
    pstrain::fuzz::AppendMessage(
        {Frame(pstrain::transport::HelloHeader(worker, config.num_workers, wire.pull))}, &out);
  }
  Origin w0{pstrain::WORKER, 0, config.job_key};
  pstrain::Header init = pstrain::transport::NewHeader(w0, pstrain::INIT_PUSH);
  const char* names[] = {"w", "b"};
  const std::vector<std::vector<int64_t>> shapes = {{2, 3}, {2}};
  for (int p = 0; p < 2; ++p) {
    pstrain::ParamMeta* meta = init.add_params();
    meta->set_name(names[p]);
    for (int64_t d : shapes[static_cast<size_t>(p)]) meta->add_shape(d);
  }
  std::vector<std::string> frames = {""};
  for (uint32_t id : mine) {
    const pstrain::Chunk& c = placement.chunk(id);
    pstrain::transport::AddChunk(init, id, static_cast<uint64_t>(c.length));
    frames.push_back(Floats(std::vector<float>(static_cast<size_t>(c.length), 0.5f + id)));
  }
  frames[0] = Frame(init);
  pstrain::fuzz::AppendMessage(frames, &out);
  if (gate >= 0) {
    pstrain::fuzz::AppendMessage({Frame(pstrain::transport::GateHeader(w0, gate))}, &out);
  }
  for (int t = 0; t < steps; ++t) {
    for (int w = 0; w < config.num_workers; ++w) {
      Origin worker{pstrain::WORKER, w, config.job_key};
      pstrain::Header pull = pstrain::transport::PullHeader(worker, t);
      if (wire.relay) (t == 0 ? pull.add_history_params(0) : pull.add_broadcast(0));
      if (wire.forward && t > 0) pull.add_rights_ahead(0);
      pstrain::fuzz::AppendMessage({Frame(pull)}, &out);
      out += PushFrames(placement, mine, worker, t, wire, config.shard, config.num_workers);
    }
  }
  for (pstrain::MessageType type : tail) {
    pstrain::Header h = pstrain::transport::NewHeader(w0, type);
    if (type == pstrain::NORM_PARTIAL || type == pstrain::NORM_TOTAL) {
      h = pstrain::transport::NormHeader({pstrain::SERVER, 1 - config.shard, config.job_key}, type,
                                         /*clock=*/0, /*sum_squares=*/2.5);
    }
    if (type == pstrain::GATE) h = pstrain::transport::GateHeader(w0, /*gate=*/1);
    pstrain::fuzz::AppendMessage({Frame(h)}, &out);
  }
  return out;
}

void MessageSeeds(const fs::path& dir) {
  using pstrain::HEARTBEAT, pstrain::STATS, pstrain::SHUTDOWN, pstrain::NORM_PARTIAL,
      pstrain::NORM_TOTAL, pstrain::GATE;
  Write(dir / "bsp_one_worker", Session(0, 2, {HEARTBEAT, STATS, SHUTDOWN}));
  Write(dir / "ssp_two_workers", Session(1 | 4, 3, {STATS}));
  Write(dir / "asp_two_workers", Session(2 | 4, 2, {HEARTBEAT, SHUTDOWN}));
  Write(dir / "bsp_two_shards_clip_shard0", Session(4 | 8 | 32, 1, {NORM_PARTIAL}));
  Write(dir / "bsp_two_shards_clip_shard1", Session(4 | 8 | 16 | 32, 1, {NORM_TOTAL}));
  // Set-up bit 6: --step-gate. The tail's GATE 1 is below the gate (refused).
  Write(dir / "gate_bsp_one_worker", Session(64 | 2, 2, {GATE, STATS}, /*gate=*/2));
  Write(dir / "gate_ssp_two_workers", Session(64 | 4 | 2, 3, {STATS, GATE}, /*gate=*/2));
  // (The mode is the set-up byte % 3: 6 is bsp with two workers.)
  // 16-bit pushes, and pulls: fp16 both ways (bsp), bf16 both ways (ssp, 2 shards),
  // bf16 pushes with float32 pulls (asp).
  Write(dir / "bsp_fp16_both_ways", Session(2 | 4, 2, {STATS}, -1, {pstrain::FLOAT16, pstrain::FLOAT16}));
  Write(dir / "ssp_bf16_both_ways_two_shards",
        Session(1 | 4 | 8, 2, {STATS}, -1, {pstrain::BFLOAT16, pstrain::BFLOAT16}));
  Write(dir / "asp_bf16_pushes", Session(2 | 4 | 32, 2, {STATS}, -1, {pstrain::BFLOAT16}));
  // Sufficient factors: push only (asp, 2 shards: w's rows split mid-row), and
  // broadcast (bsp, 2 workers: relayed factors and history in the replies).
  Write(dir / "asp_factor_pushes_two_shards",
        Session(2 | 4 | 8, 2, {STATS}, -1, {.factors = true}));
  Write(dir / "bsp_factor_broadcast",
        Session(2 | 4, 3, {STATS}, -1, {.factors = true, .relay = true}));
  Write(dir / "bsp_factor_broadcast_shard1",
        Session(2 | 4 | 8 | 16, 3, {SHUTDOWN}, -1, {.factors = true, .relay = true}));
  // R pushed once over 2 shards: each shard gets the other's holder's workers'
  // pushes without R and their R forwarded, and sends the R's it holds ahead;
  // on shard 0 in float32, on shard 1 in fp16 (set-up 12 and 30: bsp, % 3 == 0).
  Write(dir / "bsp_factor_right_holder_shard0",
        Session(4 | 8, 3, {STATS}, -1, {.factors = true, .relay = true, .forward = true}));
  Write(dir / "bsp_factor_right_holder_fp16_shard1",
        Session(2 | 4 | 8 | 16, 3, {STATS}, -1,
                {.push = pstrain::FLOAT16, .factors = true, .relay = true, .forward = true}));
  // The same in 16 bits: fp16 pushes carry fp16 factors, relayed as pushed (1
  // shard); bf16 factor pushes split mid-row over 2 shards (odd frame counts).
  Write(dir / "bsp_factor_broadcast_fp16",
        Session(2 | 4, 3, {STATS}, -1, {.push = pstrain::FLOAT16, .factors = true, .relay = true}));
  Write(dir / "asp_bf16_factor_pushes_two_shards",
        Session(2 | 4 | 8, 2, {STATS}, -1, {.push = pstrain::BFLOAT16, .factors = true}));
  // Host aggregation (bit 7): 2 pushers standing for 3 workers, bsp.
  Write(dir / "bsp_host_aggregation", Session(4 | 128, 2, {STATS}));
  std::string hello(1, '\0');
  pstrain::fuzz::AppendMessage(
      {Frame(pstrain::transport::HelloHeader({pstrain::WORKER, 0, 77}, 1))}, &hello);
  Write(dir / "hello_only", hello);
}

void DatumSeeds(const fs::path& dir) {
  caffe::Datum bytes;
  bytes.set_channels(1);
  bytes.set_height(6);
  bytes.set_width(5);
  bytes.set_label(3);
  std::string pixels;
  for (int i = 0; i < 30; ++i) pixels.push_back(static_cast<char>(i * 8));
  bytes.set_data(pixels);
  Write(dir / "uint8_1x6x5_mirror_crop", std::string(1, char(1 | 8)) + bytes.SerializeAsString());
  caffe::Datum floats;
  floats.set_channels(3);
  floats.set_height(2);
  floats.set_width(2);
  floats.set_label(1);
  for (int i = 0; i < 12; ++i) floats.add_float_data(0.25f * i - 1.f);
  Write(dir / "float_3x2x2_mean_test", std::string(1, char(2 | 32)) + floats.SerializeAsString());
}

std::unique_ptr<pstrain::Trainer> SmallTrainer(const std::string& type, const std::string& prefix) {
  caffe::SolverParameter solver;
  (void)pstrain::ParseTextProto(pstrain::fuzz::kSmallNet, "small net", solver.mutable_net_param());
  solver.set_type(type);
  solver.set_base_lr(0.01f);
  solver.set_momentum(0.9f);
  solver.set_lr_policy("fixed");
  solver.set_max_iter(1000);
  solver.set_random_seed(3);
  solver.set_snapshot_prefix(prefix);
  pstrain::TrainerOptions options;
  options.engine = pstrain::Engine::kReference;
  options.run_tests = false;
  auto trainer = pstrain::Trainer::Create(solver, "seeds", options);
  if (!trainer.ok()) {
    std::fprintf(stderr, "%s\n", trainer.status().message().c_str());
    std::exit(1);
  }
  return std::move(trainer).value();
}

std::string ReadAll(const fs::path& path) {
  std::string s;
  (void)pstrain::ReadFileToString(path.string(), &s);
  return s;
}

void FileSeeds(const fs::path& fuzz_dir, const fs::path& scratch) {
  // .caffemodel and .solverstate: a trainer's own snapshots after 2 steps.
  for (const char* type : {"SGD", "Adam"}) {
    auto trainer = SmallTrainer(type, (scratch / type).string());
    (void)trainer->Step(2);
    const std::string model = trainer->Snapshot().value();
    if (std::string(type) == "SGD") {
      Write(fuzz_dir / "corpus/caffemodel/small_net_sgd_iter_2", ReadAll(model));
    }
    std::string state = ReadAll(model.substr(0, model.size() - 11) + ".solverstate");
    // Byte 0 (even) picks the .solverstate loader and the solver type.
    const char setup = std::string(type) == "SGD" ? 0 : 2;
    Write(fuzz_dir / ("corpus/solverstate/" + std::string(type) + "_iter_2"), setup + state);
  }
  // A shard checkpoint after one bsp step (set-up 0: bsp, one worker).
  pstrain::server::ShardState shard(pstrain::fuzz::SetupConfig(0));
  shard.log = [](const std::string&) {};
  const std::string session = Session(0, 1, {});
  pstrain::fuzz::MessageInput input(reinterpret_cast<const uint8_t*>(session.data()),
                                    session.size());
  input.setup();
  std::vector<std::string> frames;
  const auto now = pstrain::server::ShardState::TimePoint{};
  while (input.Next(&frames)) {
    pstrain::server::Incoming in{"peer", {}, {}, {}};
    (void)in.header.ParseFromString(frames[0]);
    std::vector<std::vector<float>> values;
    for (size_t i = 1; i < frames.size(); ++i) {
      values.emplace_back(frames[i].size() / 4);
      std::memcpy(values.back().data(), frames[i].data(), frames[i].size());
    }
    for (auto& v : values) in.payloads.push_back(v.data());
    (void)shard.Handle(in, now);
  }
  const fs::path state = scratch / "shard0.state";
  if (!shard.WriteCheckpoint(state.string()).ok()) std::exit(1);
  Write(fuzz_dir / "corpus/solverstate/shard_bsp_step_1", std::string(1, char(1)) + ReadAll(state));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fuzz_make_seeds <fuzz folder>\n");
    return 2;
  }
  const fs::path dir = argv[1];
  const fs::path scratch =
      fs::temp_directory_path() / ("pstrain_seeds_" + std::to_string(getpid()));
  fs::create_directories(scratch);
  MessageSeeds(dir / "corpus/message");
  DatumSeeds(dir / "corpus/datum");
  FileSeeds(dir, scratch);
  fs::remove_all(scratch);
  return 0;
}
