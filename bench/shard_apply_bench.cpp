// shard-apply-bench: the shard's CPU cost per gradient byte (c_s of
// docs/scaling.md) beside what the machine's memory allows.
//
//   shard-apply-bench [--mib 64] [--runs 7] [--threads 1,2] [--dtype fp32,fp16,...]
//                     [--workers 1] [--mode bsp] [--chunk-bytes 1048576]
//
// Prints, for a buffer of --mib MiB of parameters (medians of --runs runs):
//   memcpy         GB/s copied (memory traffic: twice that, read + write);
//   bare pass      one fused SGD-with-momentum loop, h = m*h + lr*(g + wd*w);
//                  w -= h (reads g, w, h, writes w, h: 5 bytes moved per
//                  gradient byte), in GB/s of gradient, and its memory-traffic
//                  limit 5 / (2 x memcpy GB/s) in ns per gradient byte;
//   shard c_s      ShardState::Handle on PUSH messages (the real path without
//                  sockets: finite check, decode, rank-ordered sum, the SGD
//                  rule through ChunkStore) in ns per float32 gradient byte
//                  (4 bytes a value, whatever the wire encoding) and wall
//                  ns/byte at each --threads count. fp16-decode-first: an
//                  fp16 push decoded whole before the shard takes it (the
//                  socket loop's way before the decode was fused).
//
//   shard-apply-bench --factor-product 500x32x800,512x128x9216 [--runs 7]
//
// times instead FactorProduct (the sufficient-factor rebuild, c_g of
// docs/scaling.md: rows x samples x cols, 2 flops a multiply-add) in CPU ns
// per flop, in every ISA variant this CPU runs and the one the shard and the
// workers use.
// Rates are per CPU second (CLOCK_PROCESS_CPUTIME_ID), so that a machine
// shared with other work still gives comparable figures; the shard's wall
// time per byte is printed beside its c_s. CPU model and the ISA extensions
// the fused loops may use head the output.
#include <boost/program_options.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "common/ps/factor_product/variants.hpp"
#include "common/ps/factor_rebuild.hpp"
#include "common/ps/key_placement.hpp"
#include "common/transport/gradient_codec.hpp"
#include "server/encoded_gradient.hpp"
#include "server/shard_state.hpp"

namespace po = boost::program_options;
using namespace pstrain::server;  // NOLINT: a program over the library
namespace transport = pstrain::transport;
using pstrain::Chunk;
using pstrain::KeyPlacement;

namespace {

using Clock = std::chrono::steady_clock;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

double ProcessCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

struct Timing {
  double wall = 0;  // seconds
  double cpu = 0;   // CPU seconds of the whole process (every thread)
};

// `fn` timed, medians of `runs` (after one warm-up run); `before` runs untimed.
Timing TimeMedian(int runs, const std::function<void()>& fn,
                  const std::function<void()>& before = {}) {
  std::vector<double> wall, cpu;
  for (int r = 0; r <= runs; ++r) {
    if (before) before();
    const double c0 = ProcessCpuSeconds();
    const auto t0 = Clock::now();
    fn();
    const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
    const double dc = ProcessCpuSeconds() - c0;
    if (r > 0) {
      wall.push_back(dt);
      cpu.push_back(dc);
    }
  }
  return {Median(wall), Median(cpu)};
}

std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  }
  return "unknown CPU";
}

std::string Isa() {
  std::string isa;
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) isa += "AVX-512F ";
  if (__builtin_cpu_supports("avx2")) isa += "AVX2 ";
  if (__builtin_cpu_supports("fma")) isa += "FMA ";
  if (pstrain::server::HasF16c()) isa += "F16C ";  // clang's builtin does not know "f16c"
#endif
  return isa.empty() ? "baseline" : isa.substr(0, isa.size() - 1);
}

std::vector<int> IntList(const std::string& text) {
  std::vector<int> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) out.push_back(std::stoi(item));
  return out;
}

std::vector<std::string> StringList(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) out.push_back(item);
  return out;
}

// The bare pass: what a perfect shard does per value, nothing else.
__attribute__((noinline)) void BareSgd(float* __restrict w, float* __restrict h,
                                       const float* __restrict g, size_t n, float lr, float m,
                                       float wd) {
  for (size_t i = 0; i < n; ++i) {
    const float hi = m * h[i] + lr * (g[i] + wd * w[i]);
    h[i] = hi;
    w[i] -= hi;
  }
}

struct Job {
  int workers = 1;
  std::string mode = "bsp";
  int threads = 1;
  int64_t chunk_bytes = 1 << 20;
  pstrain::DataType dtype = pstrain::FLOAT32;
  bool decode_first = false;  // decode whole frames before the shard sees them
};

ShardConfig MakeConfig(const Job& job) {
  ShardConfig c;
  c.num_workers = job.workers;
  c.mode = pstrain::ParseConsistencyMode(job.mode).value();
  c.hyper.base_lr = 0.01f;
  c.hyper.momentum = 0.9f;
  c.hyper.weight_decay = 5e-4f;
  c.chunk_bytes = job.chunk_bytes;
  c.threads = job.threads;
  return c;
}

// One PUSH of the whole parameter (every chunk) as the transport would hand
// it over: payloads point into `frames` (one frame per chunk, encoded as
// job.dtype), `bytes` their sizes.
struct PushFrames {
  std::vector<std::vector<float>> frames;
  Incoming message;
};

PushFrames MakePush(const KeyPlacement& placement, const std::vector<float>& grad, int w,
                    const Job& job) {
  PushFrames p;
  p.message.peer = "w" + std::to_string(w);
  pstrain::Header& h = p.message.header;
  h.set_type(pstrain::PUSH);
  h.set_role(pstrain::WORKER);
  h.set_sender(w);
  h.set_dtype(job.dtype);
  for (const Chunk& c : placement.chunks()) {
    pstrain::ChunkRef* ref = h.add_chunks();
    ref->set_id(c.id);
    ref->set_length(static_cast<uint64_t>(c.length));
    const float* src = grad.data() + c.offset;
    std::vector<float> frame;
    if (job.dtype == pstrain::FLOAT32) {
      frame.assign(src, src + c.length);
    } else {
      transport::GradientEncoder enc(job.dtype, static_cast<size_t>(c.length), 1.0, false);
      enc.Encode(src, &frame);
    }
    p.frames.push_back(std::move(frame));
  }
  return p;
}

void Check(const std::vector<Outgoing>& out, const char* what) {
  for (const Outgoing& o : out) {
    if (o.header.type() == pstrain::ERROR) {
      std::fprintf(stderr, "shard-apply-bench: %s: %s\n", what, o.header.text().c_str());
      std::exit(1);
    }
  }
}

// Time of one step of the whole parameter (W pushes), medians of `runs`.
Timing ShardSeconds(const Job& job, int64_t n, int runs) {
  ShardState shard(MakeConfig(job));
  const auto now = Clock::now();
  const int64_t elements = n;
  auto placement = KeyPlacement::Create({elements}, 1, job.chunk_bytes).value();
  for (int w = 0; w < job.workers; ++w) {
    Incoming hello;
    hello.peer = "w" + std::to_string(w);
    hello.header.set_type(pstrain::HELLO);
    hello.header.set_role(pstrain::WORKER);
    hello.header.set_sender(w);
    hello.header.set_world_size(job.workers);
    Check(shard.Handle(hello, now), "HELLO");
  }
  std::vector<float> weights(static_cast<size_t>(n));
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (float& x : weights) x = u(rng);
  {
    Job init = job;
    init.dtype = pstrain::FLOAT32;
    PushFrames p = MakePush(placement, weights, 0, init);
    p.message.header.set_type(pstrain::INIT_PUSH);
    pstrain::ParamMeta* meta = p.message.header.add_params();
    meta->set_name("w");
    meta->add_shape(n);
    for (auto& f : p.frames) p.message.payloads.push_back(f.data());
    Check(shard.Handle(p.message, now), "INIT_PUSH");
  }
  std::vector<PushFrames> pushes;
  for (int w = 0; w < job.workers; ++w) {
    std::vector<float> grad(static_cast<size_t>(n));
    for (float& x : grad) x = 1e-3f * u(rng);
    pushes.push_back(MakePush(placement, grad, w, job));
  }
  // The frames are read only (float32 ones too: the shard does not store
  // into a received frame on this path), so every step reuses them.
  int64_t clock = 0;
  for (PushFrames& p : pushes) {
    for (auto& f : p.frames) {
      p.message.payloads.push_back(f.data());
      p.message.payload_bytes.push_back(f.size() * sizeof(float));
    }
    if (job.dtype == pstrain::FLOAT32) p.message.payload_bytes.clear();
  }
  // --dtype fp16-decode-first: what the socket loop did before the decode
  // was fused: each frame decoded whole (transport::Decode), then a float32 push.
  std::vector<std::vector<float>> decoded(placement.chunks().size());
  Incoming plain;
  auto step = [&] {
    for (PushFrames& p : pushes) {
      p.message.header.set_clock(clock);
      if (!job.decode_first) {
        Check(shard.Handle(p.message, now), "PUSH");
        continue;
      }
      plain.peer = p.message.peer;
      plain.header = p.message.header;
      plain.header.set_dtype(pstrain::FLOAT32);
      plain.payloads.clear();
      for (size_t i = 0; i < p.frames.size(); ++i) {
        const uint64_t len = p.message.header.chunks(static_cast<int>(i)).length();
        decoded[i].resize(len);
        transport::Decode(job.dtype, p.frames[i].data(), p.frames[i].size() * sizeof(float), len,
                          decoded[i].data());
        plain.payloads.push_back(decoded[i].data());
      }
      Check(shard.Handle(plain, now), "PUSH");
    }
    ++clock;
  };
  return TimeMedian(runs, step);
}

// --factor-product: each "RxSxC" shape, every variant; returns the exit code.
int FactorProducts(const std::string& shapes, int runs) {
  for (const std::string& text : StringList(shapes)) {
    long long rows = 0, samples = 0, cols = 0;
    char tail = 0;
    if (std::sscanf(text.c_str(), "%lldx%lldx%lld%c", &rows, &samples, &cols, &tail) != 3 ||
        rows < 1 || samples < 1 || cols < 1) {
      std::fprintf(stderr, "shard-apply-bench: --factor-product: '%s' is not ROWSxSAMPLESxCOLS\n",
                   text.c_str());
      return 2;
    }
    std::vector<float> left(static_cast<size_t>(samples * rows)),
        right(static_cast<size_t>(samples * cols)), out(static_cast<size_t>(rows * cols));
    std::mt19937 rng(1);
    std::normal_distribution<float> normal;
    for (float& x : left) x = normal(rng);
    for (float& x : right) x = normal(rng);
    const double flops = 2.0 * static_cast<double>(rows * samples * cols);
    // Each timed run repeats the product to at least ~0.2 GFLOP.
    const int reps = std::max(1, static_cast<int>(2e8 / flops));
    auto variants = pstrain::factor_product::SupportedVariants();
    variants.push_back({"chosen:" + pstrain::factor_product::ChosenVariant().isa,
                        pstrain::factor_product::ChosenVariant().kernel});
    for (const auto& v : variants) {
      const double cpu = TimeMedian(runs, [&] {
                           for (int i = 0; i < reps; ++i) {
                             v.kernel(left.data(), rows, right.data(), rows, samples, cols,
                                      out.data());
                           }
                         }).cpu / reps;
      std::printf("factor product %s %s: %.5f ns/flop CPU (%.1f GFLOP/s)\n", text.c_str(),
                  v.isa.c_str(), cpu * 1e9 / flops, flops / cpu / 1e9);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int mib = 64, runs = 7;
  Job base;
  std::string threads_text = "1", dtypes_text = "fp32,fp16", factor_shapes;
  po::options_description desc("shard-apply-bench");
  desc.add_options()("help", "this text")("mib", po::value(&mib), "parameter MiB (default 64)")(
      "runs", po::value(&runs), "timed runs per figure, median (default 7)")(
      "threads", po::value(&threads_text), "apply threads, a list (default 1)")(
      "dtype", po::value(&dtypes_text), "push encodings: fp32, fp16, topk, sign, fp16-decode-first (default fp32,fp16)")(
      "workers", po::value(&base.workers), "workers pushing each step (default 1)")(
      "mode", po::value(&base.mode), "bsp, ssp or asp (default bsp)")(
      "chunk-bytes", po::value(&base.chunk_bytes), "chunk size (default 1 MiB)")(
      "factor-product", po::value(&factor_shapes),
      "time FactorProduct at shapes RxSxC[,...] instead (ns per flop)");
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, desc), vm);
    po::notify(vm);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "shard-apply-bench: %s\n", e.what());
    return 2;
  }
  if (vm.count("help")) {
    std::cout << desc;
    return 0;
  }
  if (!factor_shapes.empty()) {
    std::printf("cpu: %s\nisa: %s\nmedians of %d runs\n", CpuModel().c_str(), Isa().c_str(), runs);
    return FactorProducts(factor_shapes, runs);
  }
  const int64_t n = static_cast<int64_t>(mib) << 18;  // floats
  const size_t bytes = static_cast<size_t>(n) * sizeof(float);
  std::printf("cpu: %s\nisa: %s\nbuffer: %d MiB of float32 parameters, medians of %d runs\n",
              CpuModel().c_str(), Isa().c_str(), mib, runs);

  std::vector<float> a(static_cast<size_t>(n), 1.f), b(static_cast<size_t>(n), 2.f),
      c(static_cast<size_t>(n), 0.f);
  const double copy_s = TimeMedian(runs, [&] { std::memcpy(b.data(), a.data(), bytes); }).cpu;
  const double memcpy_gbs = static_cast<double>(bytes) / copy_s / 1e9;
  const double traffic_gbs = 2 * memcpy_gbs;
  std::printf("memcpy: %.2f GB/s copied (%.2f GB/s of memory traffic, read + write)\n",
              memcpy_gbs, traffic_gbs);

  const double bare_s =
      TimeMedian(runs, [&] { BareSgd(a.data(), c.data(), b.data(), static_cast<size_t>(n),
                                     0.01f, 0.9f, 5e-4f); }).cpu;
  const double limit = 5.0 / traffic_gbs;  // ns per gradient byte
  std::printf(
      "bare fused SGD pass: %.2f GB/s of gradient, %.3f ns/byte; memory-traffic limit %.3f "
      "ns/byte (5 bytes moved per gradient byte at the memcpy rate)\n",
      static_cast<double>(bytes) / bare_s / 1e9, bare_s * 1e9 / static_cast<double>(bytes),
      limit);

  for (const std::string& name : StringList(dtypes_text)) {
    Job job = base;
    std::string encoding = name == "fp32" ? "none" : name;
    if (name == "fp16-decode-first") {
      encoding = "fp16";
      job.decode_first = true;
    }
    auto dtype = transport::ParseCompression(encoding);
    if (!dtype.ok()) {
      std::fprintf(stderr, "shard-apply-bench: --dtype: %s\n", dtype.status().message().c_str());
      return 2;
    }
    job.dtype = dtype.value();
    for (int t : IntList(threads_text)) {
      job.threads = t;
      const Timing s = ShardSeconds(job, n, runs);
      const double grad_bytes = static_cast<double>(bytes) * job.workers;
      const double wall = s.wall * 1e9 / grad_bytes, c_s = s.cpu * 1e9 / grad_bytes;
      std::printf(
          "shard %s %s W=%d threads=%d: c_s %.3f ns/byte CPU (%.2fx the memory-traffic limit), "
          "wall %.3f ns/byte (%.2f GB/s of gradient)\n",
          job.mode.c_str(), name.c_str(), job.workers, t, c_s, c_s / limit, wall,
          grad_bytes / s.wall / 1e9);
    }
  }
  return 0;
}
