// Engine auto: picks, for every layer of a net that has more than one CPU
// implementation (Layer::CpuImplementations), the fastest for its shape.
//
// Each candidate runs forward (+ the backward that will run: AutotuneBackward)
// on the layer's own blobs: a warm-up round, then `repetitions` timed rounds
// (fewer once they took 50 ms per candidate), each running every candidate
// once in turn, so that load from elsewhere hits all alike. The minimum counts; the
// fastest is selected (the default, listed first, wins ties within 2%).
// Timing changes no state: every blob the layer touches (bottoms, tops,
// learnable blobs, BatchNorm's running statistics among them) is saved before
// and restored after, data and diffs; the input is a fixed pattern, not the
// net's random stream, and no data is read.
//
// A choice is remembered under a key of layer type, layer parameters (fillers
// excepted), bottom shapes, which gradients are wanted, CPU thread count, the
// CPU's vector ISA and the cap on oneDNN's (ONEDNN_MAX_CPU_ISA), and the candidates' names:
//   - for the process (every later net with the same layer shape reuses it),
//   - in `cache_path` when given: one "key<TAB>implementation" a line, read
//     and appended under an exclusive flock held while a net is tuned. The
//     workers of a job on one machine thus tune one after the other and agree,
//     and reruns and resumed runs on the machine reuse the first run's choices
//     (bit-identical BSP reruns). A hand-edited line pins a choice; a name the
//     layer does not have is an error naming the file and line.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "common/status.hpp"

namespace pstrain {

class Net;

// The choice made for one layer.
struct ImplementationChoice {
  int layer_index = 0;
  std::string layer;           // its name
  std::string type;            // its type
  std::string implementation;  // the one selected
  // Milliseconds of forward (+ backward) per candidate, in the layer's order;
  // empty when the choice came from a cache.
  std::vector<std::pair<std::string, double>> candidates_ms;
  std::string source;  // "timed", "process cache" or "cache file"
  // One log line: "engine auto: layer 'conv1' (Convolution): onednn 1.2 ms,
  // reference 3.4 ms -> onednn (timed)".
  std::string Describe() const;
};

// Which backward passes a candidate's time includes: those that will run.
enum class AutotuneBackward {
  // Training: the layers and bottoms the net's own backward computes (those
  // leading to a loss, or all with force_backward); a TEST-phase net: none.
  kAsNetNeeds,
  // ps-net time (TimeNet, net_timer.hpp), which runs backward on nets without
  // a loss too: every layer with parameters or a bottom of TimedPropagateDown.
  // Timing a deploy net's layers forward only would pick implementations
  // whose backward is slow (oneDNN's reference LRN backward, issue 32).
  kAsNetTimer,
};

struct AutotuneOptions {
  bool enabled = false;    // false: every layer runs its default (engine fast)
  std::string cache_path;  // empty: remembered in this process only
  int repetitions = 3;
  AutotuneBackward backward = AutotuneBackward::kAsNetNeeds;
  // Called once per tuned layer, in layer order (a log line, a JSON event).
  std::function<void(const ImplementationChoice&)> on_choice;
  // Called with a problem that does not stop the net (cache file unusable).
  std::function<void(const std::string&)> on_warning;
};

// $XDG_CACHE_HOME/pstrain/cpu-implementations.tsv, else
// $HOME/.cache/pstrain/cpu-implementations.tsv; empty when neither is set.
std::string DefaultAutotuneCachePath();

// The cache file an --engine-cache flag names: empty (flag not given) gives
// DefaultAutotuneCachePath(), "none" gives "" (no file), anything else itself.
std::string AutotuneCachePathFromFlag(const std::string& flag);

// Tunes `net` (built with Engine::kFast) as above. Errors: a cache-file line
// naming an implementation the layer lacks.
Result<std::vector<ImplementationChoice>> AutotuneCpuImplementations(
    Net& net, const AutotuneOptions& options);

}  // namespace pstrain
