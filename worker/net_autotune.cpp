#include "worker/net_autotune.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>

#include "common/math_cpu.hpp"
#include "worker/layers/cpu_kernel_isa.hpp"
#include "worker/net.hpp"
#include "worker/net_timer.hpp"

namespace pstrain {
namespace {

// The choices of this process, by key.
std::mutex process_cache_mutex;
std::map<std::string, std::string>& ProcessCache() {
  static std::map<std::string, std::string> cache;
  return cache;
}

std::string CpuFeatures() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return "avx512f";
  if (__builtin_cpu_supports("avx2")) return "avx2";
  return "baseline";
}

// The cap a user put on oneDNN's ISA (its own environment variables), "all"
// when none: with the CPU's features it decides which kernels oneDNN runs.
std::string OnednnMaxIsa() {
  for (const char* name : {"ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"}) {
    const char* value = std::getenv(name);
    if (value != nullptr && value[0] != '\0') {
      std::string isa = value;
      for (char& c : isa) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      return isa;
    }
  }
  return "all";
}

std::string Join(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ",") + n;
  return out;
}

// The backward passes the timing includes, per layer: whether the layer runs
// one and which bottoms get a gradient (AutotuneOptions::backward).
struct BackwardPlan {
  std::vector<bool> layer;
  std::vector<std::vector<bool>> propagate;
};

BackwardPlan PlanBackward(const Net& net, AutotuneBackward backward) {
  BackwardPlan plan;
  const size_t n = net.layers().size();
  if (backward == AutotuneBackward::kAsNetTimer) {
    plan.propagate = TimedPropagateDown(net);
    for (size_t i = 0; i < n; ++i) {
      const auto& p = plan.propagate[i];
      plan.layer.push_back(!net.layers()[i]->blobs().empty() ||
                           std::find(p.begin(), p.end(), true) != p.end());
    }
    return plan;
  }
  // Backward counts in training nets only (a test net runs forward).
  plan.propagate = net.bottom_need_backward();
  for (size_t i = 0; i < n; ++i) {
    plan.layer.push_back(net.phase() == caffe::TRAIN &&
                         net.layer_need_backward(static_cast<int>(i)));
  }
  return plan;
}

// What decides a layer's speed: its parameters without name, wiring, fillers
// and learned values; its bottom shapes and wanted gradients; the machine.
std::string ChoiceKey(const Net& net, int i, const BackwardPlan& plan,
                      const std::vector<std::string>& candidates) {
  Layer& layer = *net.layers()[i];
  caffe::LayerParameter p = layer.layer_param();
  p.clear_name();
  p.clear_bottom();
  p.clear_top();
  p.clear_blobs();
  p.clear_param();
  p.clear_include();
  p.clear_exclude();
  p.clear_loss_weight();
  if (p.has_convolution_param()) {
    p.mutable_convolution_param()->clear_weight_filler();
    p.mutable_convolution_param()->clear_bias_filler();
  }
  if (p.has_inner_product_param()) {
    p.mutable_inner_product_param()->clear_weight_filler();
    p.mutable_inner_product_param()->clear_bias_filler();
  }
  std::string key = layer.type();
  key += " | " + p.ShortDebugString() + " | bottoms";
  for (const Blob* b : net.bottom_vecs()[i]) key += " " + ShapeString(b->shape());
  key += " | backward ";
  if (plan.layer[i]) {
    for (bool d : plan.propagate[i]) key += d ? "1" : "0";
    for (size_t k = 0; k < layer.blobs().size(); ++k) {
      key += layer.param_propagate_down(static_cast<int>(k)) ? "p" : "-";
    }
  } else {
    key += "none";
  }
  const char* blas_core = std::getenv("OPENBLAS_CORETYPE");
  key += " | threads " + std::to_string(CpuThreads()) + " | cpu " + CpuFeatures() +
         " | onednn max isa " + OnednnMaxIsa() + " | kernel isa " + CpuIsaName(KernelIsa()) +
         " | openblas core " + (blas_core != nullptr && blas_core[0] != '\0' ? blas_core : "auto") +
         " | candidates " + Join(candidates);
  for (char& c : key) {
    if (c == '\t' || c == '\n') c = ' ';
  }
  return key;
}

// A blob's values, kept while a layer is timed.
struct SavedBlob {
  Blob* blob;
  std::vector<float> data, diff;
};

// A fixed pattern in [-1, 1) that uses no random stream of the net.
void FillPattern(float* x, int64_t n, uint32_t salt) {
  uint32_t state = 2463534242u ^ salt;
  for (int64_t k = 0; k < n; ++k) {
    state ^= state << 13;
    state ^= state >> 17;
    state ^= state << 5;
    x[k] = static_cast<float>(state >> 8) * (2.f / 16777216.f) - 1.f;
  }
}

// Times every candidate of layer i; restores every blob it touched.
std::vector<std::pair<std::string, double>> TimeCandidates(
    Net& net, int i, const BackwardPlan& plan, const std::vector<std::string>& candidates,
    int repetitions) {
  using Clock = std::chrono::steady_clock;
  Layer& layer = *net.layers()[i];
  const BlobVec& bottom = net.bottom_vecs()[i];
  const BlobVec& top = net.top_vecs()[i];
  const bool backward = plan.layer[i];
  const std::vector<bool>& propagate = plan.propagate[i];
  std::vector<SavedBlob> saved;
  std::set<Blob*> seen;
  auto save = [&](Blob* b) {
    if (b->count() == 0 || !seen.insert(b).second) return;
    saved.push_back({b,
                     {b->cpu_data(), b->cpu_data() + b->count()},
                     {b->cpu_diff(), b->cpu_diff() + b->count()}});
  };
  for (Blob* b : bottom) save(b);
  for (Blob* b : top) save(b);
  for (const auto& b : layer.blobs()) save(b.get());
  // Inputs: a pattern where a value flows (labels and other index inputs,
  // which take no gradient, keep theirs); top diffs for backward.
  for (size_t b = 0; b < bottom.size(); ++b) {
    if (layer.AllowForceBackward(static_cast<int>(b)) && bottom[b]->count() > 0) {
      FillPattern(bottom[b]->mutable_cpu_data(), bottom[b]->count(), static_cast<uint32_t>(b));
    }
  }
  for (size_t t = 0; t < top.size(); ++t) {
    FillPattern(top[t]->mutable_cpu_diff(), top[t]->count(), 100u + static_cast<uint32_t>(t));
  }
  // Round-robin: round 0 warms every candidate up (primitives, buffers), then
  // each timed round runs every candidate once, so that a burst of load from
  // elsewhere hits them alike; the minimum over rounds counts.
  std::vector<std::pair<std::string, double>> times;
  for (const std::string& name : candidates) times.emplace_back(name, 1e300);
  double spent = 0.0;
  for (int round = 0; round <= repetitions; ++round) {
    for (auto& [name, best] : times) {
      if (!layer.SelectCpuImplementation(name).ok()) continue;  // the layer's own names
      const auto start = Clock::now();
      layer.Forward(bottom, top);
      if (backward) layer.Backward(top, propagate, bottom);
      const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
      if (round > 0) {
        best = std::min(best, ms);
        spent += ms;
      }
    }
    // A slow layer: fewer rounds are enough.
    if (round > 0 && spent > 50.0 * static_cast<double>(times.size())) break;
  }
  for (const SavedBlob& s : saved) {
    std::copy(s.data.begin(), s.data.end(), s.blob->mutable_cpu_data());
    std::copy(s.diff.begin(), s.diff.end(), s.blob->mutable_cpu_diff());
  }
  return times;
}

// The fastest; the default (first) unless another is more than 2% faster.
std::string Fastest(const std::vector<std::pair<std::string, double>>& times) {
  size_t best = 0;
  for (size_t k = 1; k < times.size(); ++k) {
    if (times[k].second < times[best].second) best = k;
  }
  if (best != 0 && times[best].second > 0.98 * times[0].second) best = 0;
  return times[best].first;
}

// The cache file, locked for as long as it lives.
class CacheFile {
 public:
  CacheFile(const CacheFile&) = delete;
  CacheFile& operator=(const CacheFile&) = delete;
  ~CacheFile() {
    if (fd_ >= 0) ::close(fd_);  // releases the lock
  }
  // Opens (creating folders and file) and locks; an error when that fails.
  static Result<std::unique_ptr<CacheFile>> Open(const std::string& path) {
    std::error_code ec;
    const std::filesystem::path parent = std::filesystem::path(path).parent_path();
    if (!parent.empty()) std::filesystem::create_directories(parent, ec);
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return Status::Error(path + ": cannot open the engine auto cache file");
    std::unique_ptr<CacheFile> file(new CacheFile(path, fd));
    if (::flock(fd, LOCK_EX) != 0) return Status::Error(path + ": cannot lock");
    return file;
  }
  // key -> (implementation, line).
  Status Read(std::map<std::string, std::pair<std::string, int>>* entries) const {
    std::ifstream in(path_);
    std::string line;
    int number = 0;
    while (std::getline(in, line)) {
      ++number;
      if (line.empty() || line[0] == '#') continue;
      const size_t tab = line.rfind('\t');
      if (tab == std::string::npos || tab + 1 == line.size()) {
        return Status::Error(path_ + ":" + std::to_string(number) +
                             ": expected 'key<TAB>implementation'");
      }
      (*entries)[line.substr(0, tab)] = {line.substr(tab + 1), number};
    }
    return Status::Ok();
  }
  void Append(const std::string& text) const {
    std::ofstream out(path_, std::ios::app);
    out << text;
  }

 private:
  CacheFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  std::string path_;
  int fd_ = -1;
};

std::string Ms(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3f", ms);
  return buf;
}

}  // namespace

std::string ImplementationChoice::Describe() const {
  std::string line = "engine auto: layer '" + layer + "' (" + type + "): ";
  if (candidates_ms.empty()) return line + implementation + " (" + source + ")";
  for (size_t k = 0; k < candidates_ms.size(); ++k) {
    line += (k ? ", " : "") + candidates_ms[k].first + " " + Ms(candidates_ms[k].second) + " ms";
  }
  return line + " -> " + implementation + " (" + source + ")";
}

std::string DefaultAutotuneCachePath() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg != nullptr && xdg[0] == '/') return std::string(xdg) + "/pstrain/cpu-implementations.tsv";
  const char* home = std::getenv("HOME");
  if (home != nullptr && home[0] == '/') {
    return std::string(home) + "/.cache/pstrain/cpu-implementations.tsv";
  }
  return "";
}

std::string AutotuneCachePathFromFlag(const std::string& flag) {
  if (flag.empty()) return DefaultAutotuneCachePath();
  if (flag == "none") return "";
  return flag;
}

Result<std::vector<ImplementationChoice>> AutotuneCpuImplementations(
    Net& net, const AutotuneOptions& options) {
  std::vector<ImplementationChoice> choices;
  std::unique_ptr<CacheFile> file;
  std::map<std::string, std::pair<std::string, int>> stored;
  if (!options.cache_path.empty()) {
    auto opened = CacheFile::Open(options.cache_path);
    if (opened.ok()) {
      file = std::move(opened).value();
      PSTRAIN_RETURN_IF_ERROR(file->Read(&stored));
    } else if (options.on_warning) {
      options.on_warning(opened.status().message() + "; choices are kept in this process only");
    }
  }
  const BackwardPlan plan = PlanBackward(net, options.backward);
  std::string appended;
  for (size_t i = 0; i < net.layers().size(); ++i) {
    Layer& layer = *net.layers()[i];
    const std::vector<std::string> candidates = layer.CpuImplementations();
    if (candidates.size() < 2) continue;
    ImplementationChoice choice;
    choice.layer_index = static_cast<int>(i);
    choice.layer = layer.name();
    choice.type = layer.type();
    const std::string key = ChoiceKey(net, static_cast<int>(i), plan, candidates);
    // The file first: a line edited by hand pins the choice.
    auto stored_it = stored.find(key);
    if (stored_it != stored.end()) {
      Status s = layer.SelectCpuImplementation(stored_it->second.first);
      if (!s.ok()) {
        return s.WithContext(options.cache_path + ":" + std::to_string(stored_it->second.second));
      }
      choice.implementation = stored_it->second.first;
      choice.source = "cache file";
    }
    if (choice.implementation.empty()) {
      std::lock_guard<std::mutex> lock(process_cache_mutex);
      auto it = ProcessCache().find(key);
      if (it != ProcessCache().end()) {
        choice.implementation = it->second;
        choice.source = "process cache";
        if (file != nullptr) appended += key + "\t" + choice.implementation + "\n";
      }
    }
    if (choice.implementation.empty()) {
      choice.candidates_ms =
          TimeCandidates(net, static_cast<int>(i), plan, candidates, options.repetitions);
      choice.implementation = Fastest(choice.candidates_ms);
      choice.source = "timed";
      appended += key + "\t" + choice.implementation + "\n";
    }
    PSTRAIN_RETURN_IF_ERROR(layer.SelectCpuImplementation(choice.implementation));
    {
      std::lock_guard<std::mutex> lock(process_cache_mutex);
      ProcessCache()[key] = choice.implementation;
    }
    if (options.on_choice) options.on_choice(choice);
    choices.push_back(std::move(choice));
  }
  if (file != nullptr && !appended.empty()) file->Append(appended);
  return choices;
}

}  // namespace pstrain
