#include "worker/net_rewrite.hpp"

#include <algorithm>
#include <map>
#include <string>
#include <utility>

namespace pstrain {

bool StateMeetsRule(const caffe::NetState& state, const caffe::NetStateRule& rule) {
  if (rule.has_phase() && rule.phase() != state.phase()) return false;
  if (rule.has_min_level() && state.level() < rule.min_level()) return false;
  if (rule.has_max_level() && state.level() > rule.max_level()) return false;
  const auto has_stage = [&](const std::string& s) {
    return std::find(state.stage().begin(), state.stage().end(), s) != state.stage().end();
  };
  for (const auto& s : rule.stage()) {
    if (!has_stage(s)) return false;
  }
  for (const auto& s : rule.not_stage()) {
    if (has_stage(s)) return false;
  }
  return true;
}

Status FilterNet(const caffe::NetParameter& in, const caffe::NetState& state,
                 caffe::NetParameter* out, std::vector<int>* lines) {
  out->CopyFrom(in);
  out->clear_layer();
  std::vector<int> kept_lines;
  for (int i = 0; i < in.layer_size(); ++i) {
    const caffe::LayerParameter& layer = in.layer(i);
    if (layer.include_size() > 0 && layer.exclude_size() > 0) {
      return Status::Error("layer '" + layer.name() +
                           "' has both include and exclude rules; give one or the other");
    }
    bool keep = layer.include_size() == 0;
    for (const auto& rule : layer.exclude()) {
      if (StateMeetsRule(state, rule)) keep = false;
    }
    for (const auto& rule : layer.include()) {
      if (StateMeetsRule(state, rule)) keep = true;
    }
    if (!keep) continue;
    *out->add_layer() = layer;
    if (lines != nullptr && i < static_cast<int>(lines->size())) kept_lines.push_back((*lines)[i]);
  }
  if (lines != nullptr) *lines = std::move(kept_lines);
  return Status::Ok();
}

namespace {

std::string SplitLayerName(const std::string& layer, const std::string& blob, int top_index) {
  return blob + "_" + layer + "_" + std::to_string(top_index) + "_split";
}

std::string SplitBlobName(const std::string& layer, const std::string& blob, int top_index,
                          int split_index) {
  return SplitLayerName(layer, blob, top_index) + "_" + std::to_string(split_index);
}

}  // namespace

void InsertSplits(const caffe::NetParameter& in, caffe::NetParameter* out,
                  std::vector<int>* lines) {
  // For every (layer, top) the bottoms that consume it, found by tracking the
  // most recent producer of each blob name (in-place layers re-produce it).
  using TopId = std::pair<int, int>;
  std::map<std::string, TopId> last_producer;
  std::map<TopId, int> consumers;
  std::map<std::pair<int, int>, TopId> bottom_source;  // (layer, bottom) -> producing top
  for (int i = 0; i < in.layer_size(); ++i) {
    const auto& layer = in.layer(i);
    for (int b = 0; b < layer.bottom_size(); ++b) {
      auto it = last_producer.find(layer.bottom(b));
      if (it == last_producer.end()) continue;  // the net reports unknown bottoms
      bottom_source[{i, b}] = it->second;
      ++consumers[it->second];
    }
    for (int t = 0; t < layer.top_size(); ++t) last_producer[layer.top(t)] = {i, t};
  }
  const auto loss_weight = [&](const TopId& top) {
    const auto& layer = in.layer(top.first);
    return top.second < layer.loss_weight_size() ? layer.loss_weight(top.second) : 0.f;
  };

  out->CopyFrom(in);
  out->clear_layer();
  std::vector<int> new_lines;
  std::map<TopId, int> next_split;  // next split output to hand out per top
  for (int i = 0; i < in.layer_size(); ++i) {
    const int producer_index = out->layer_size();
    caffe::LayerParameter* layer = out->add_layer();
    *layer = in.layer(i);
    const int line = lines != nullptr && i < static_cast<int>(lines->size()) ? (*lines)[i] : 0;
    new_lines.push_back(line);
    // Rename bottoms fed through a split.
    for (int b = 0; b < layer->bottom_size(); ++b) {
      auto src = bottom_source.find({i, b});
      if (src == bottom_source.end()) continue;
      const TopId top = src->second;
      const int n = consumers[top];
      if (n > 1 || (n >= 1 && loss_weight(top) != 0.f)) {
        const auto& producer = in.layer(top.first);
        *layer->mutable_bottom(b) = SplitBlobName(producer.name(), producer.top(top.second),
                                                  top.second, next_split[top]++);
      }
    }
    // Add the split layers after this layer's tops.
    for (int t = 0; t < in.layer(i).top_size(); ++t) {
      const TopId top{i, t};
      const int n = consumers.count(top) ? consumers[top] : 0;
      const float weight = loss_weight(top);
      if (!(n > 1 || (n >= 1 && weight != 0.f))) continue;
      const std::string& blob = in.layer(i).top(t);
      caffe::LayerParameter split;
      split.set_name(SplitLayerName(in.layer(i).name(), blob, t));
      split.set_type("Split");
      split.add_bottom(blob);
      for (int k = 0; k < n; ++k) {
        split.add_top(SplitBlobName(in.layer(i).name(), blob, t, k));
      }
      if (weight != 0.f) {
        // The producer's loss moves to an extra split output nobody consumes.
        split.add_top(SplitBlobName(in.layer(i).name(), blob, t, n));
        for (int k = 0; k < n; ++k) split.add_loss_weight(0.f);
        split.add_loss_weight(weight);
        out->mutable_layer(producer_index)->set_loss_weight(t, 0.f);
      }
      *out->add_layer() = split;
      new_lines.push_back(line);
    }
  }
  if (lines != nullptr) *lines = std::move(new_lines);
}

}  // namespace pstrain
