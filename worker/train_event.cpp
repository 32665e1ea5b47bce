#include "worker/train_event.hpp"

#include <cstdio>

#include "common/json_line.hpp"

namespace pstrain {

std::string FormatEvent(const TrainEvent& e, bool json,
                        const std::vector<std::pair<std::string, std::string>>& extra) {
  if (json) {
    JsonLine line;
    line.Add("event", e.kind);
    for (const auto& [k, v] : extra) line.Add(k, v);
    line.Add("iter", e.iter);
    for (const auto& [k, v] : e.values) line.Add(k, v);
    if (!e.text.empty()) line.Add("path", e.text);
    return line.str();
  }
  std::string out;
  for (const auto& [k, v] : extra) out += "[" + k + " " + v + "] ";
  if (e.kind == "snapshot") return out + "Snapshot at iteration " + std::to_string(e.iter) + ": " + e.text;
  if (e.kind == "test") {
    out += "Test at iteration " + std::to_string(e.iter) + ":";
  } else if (e.kind == "train") {
    out += "Iteration " + std::to_string(e.iter) + ":";
  } else {
    out += e.kind + " at iteration " + std::to_string(e.iter) + ":";
  }
  for (const auto& [k, v] : e.values) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), " %s = %.6g", k.c_str(), v);
    out += buf;
  }
  return out;
}

void SmoothedLoss::Add(float loss) {
  if (losses_.size() < window_) {
    losses_.push_back(loss);
    value_ = (value_ * static_cast<double>(losses_.size() - 1) + loss) /
             static_cast<double>(losses_.size());
    return;
  }
  value_ += (loss - losses_[oldest_]) / static_cast<double>(window_);
  losses_[oldest_] = loss;
  oldest_ = (oldest_ + 1) % window_;
}

}  // namespace pstrain
