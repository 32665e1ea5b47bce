#include "worker/model_diff.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <utility>

#include "common/proto_io.hpp"
#include "worker/caffe_hdf5.hpp"

namespace pstrain {

namespace {

// A blob's shape as given (shape field, or legacy num/channels/height/width).
std::vector<int64_t> ShapeOf(const caffe::BlobProto& blob) {
  if (blob.has_num() || blob.has_channels() || blob.has_height() || blob.has_width()) {
    return {blob.num(), blob.channels(), blob.height(), blob.width()};
  }
  return {blob.shape().dim().begin(), blob.shape().dim().end()};
}

// Padded on the left with 1s to 4 axes, so legacy and shape-field forms compare.
std::vector<int64_t> Padded(std::vector<int64_t> shape) {
  if (shape.size() < 4) shape.insert(shape.begin(), 4 - shape.size(), 1);
  return shape;
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string text;
  for (int64_t d : shape) text += (text.empty() ? "" : " x ") + std::to_string(d);
  return text.empty() ? "(scalar)" : text;
}

int64_t ShapeCount(const std::vector<int64_t>& shape) {
  int64_t count = 1;
  for (int64_t d : shape) count *= d;
  return count;
}

int64_t ValueCount(const caffe::BlobProto& blob) {
  return blob.double_data_size() > 0 ? blob.double_data_size() : blob.data_size();
}

double Value(const caffe::BlobProto& blob, int64_t k) {
  const int i = static_cast<int>(k);
  return blob.double_data_size() > 0 ? blob.double_data(i) : static_cast<double>(blob.data(i));
}

// "1 blob", "2 blobs".
std::string Count(int64_t n, const std::string& noun) {
  return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

std::string Number(double x) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.9g", x);
  return text;
}

// Name -> the layer with blobs of that name (the first, when repeated).
std::map<std::string, const caffe::LayerParameter*> LayersWithBlobs(const caffe::NetParameter& net,
                                                                    const std::string& side,
                                                                    ModelDiff* report) {
  std::map<std::string, const caffe::LayerParameter*> layers;
  for (const auto& layer : net.layer()) {
    if (layer.blobs_size() == 0) continue;
    if (!layers.emplace(layer.name(), &layer).second) {
      report->mismatches.push_back("layer '" + layer.name() + "' has blobs twice in " + side);
    }
  }
  return layers;
}

class Comparison {
 public:
  Comparison(std::string a_name, std::string b_name, ModelDiff* report)
      : a_name_(std::move(a_name)), b_name_(std::move(b_name)), report_(report) {}

  void Layers(const caffe::LayerParameter& a, const caffe::LayerParameter& b) {
    const int n = std::max(a.blobs_size(), b.blobs_size());
    for (int j = 0; j < n; ++j) {
      const std::string where = "layer '" + a.name() + "' blob " + std::to_string(j);
      if (j >= a.blobs_size() || j >= b.blobs_size()) {
        Mismatch(where + " is only in " + (j < a.blobs_size() ? a_name_ : b_name_));
        continue;
      }
      Blobs(a.blobs(j), b.blobs(j), where, a.name() + "/" + std::to_string(j));
    }
  }

  void Mismatch(const std::string& line) { report_->mismatches.push_back(line); }

 private:
  void Blobs(const caffe::BlobProto& a, const caffe::BlobProto& b, const std::string& where,
             const std::string& id) {
    const std::vector<int64_t> a_shape = ShapeOf(a), b_shape = ShapeOf(b);
    if (Padded(a_shape) != Padded(b_shape)) {
      Mismatch(where + ": shape " + ShapeText(a_shape) + " in " + a_name_ + ", " +
               ShapeText(b_shape) + " in " + b_name_);
      return;
    }
    bool counts_ok = true;
    for (const auto* side : {&a, &b}) {
      const std::vector<int64_t>& shape = side == &a ? a_shape : b_shape;
      if (ValueCount(*side) != ShapeCount(shape)) {
        Mismatch(where + " holds " + std::to_string(ValueCount(*side)) + " values for shape " +
                 ShapeText(shape) + " in " + (side == &a ? a_name_ : b_name_));
        counts_ok = false;
      }
    }
    if (!counts_ok) return;
    double abs = 0, scale = 0;
    int64_t unmatched = 0, first = -1;
    for (int64_t k = 0; k < ValueCount(a); ++k) {
      const double x = Value(a, k), y = Value(b, k);
      if (std::isinf(x) && x == y) continue;  // the same infinity
      const double d = std::fabs(x - y);
      if (!std::isfinite(d)) {  // NaN on a side, or an unmatched infinity
        if (unmatched++ == 0) first = k;
        continue;
      }
      abs = std::max(abs, d);
      scale = std::max({scale, std::fabs(x), std::fabs(y)});
    }
    ++report_->blobs_compared;
    if (unmatched > 0) {
      Mismatch(where + ": " + Count(unmatched, "value") +
               " not comparable (NaN, or an infinity facing another value); the first at index " +
               std::to_string(first) + ": " + Number(Value(a, first)) + " in " + a_name_ + ", " +
               Number(Value(b, first)) + " in " + b_name_);
    }
    const double rel = scale > 0 ? abs / scale : 0;
    report_->max_abs = std::max(report_->max_abs, abs);
    if (report_->worst.empty() || rel > report_->max_rel) {
      report_->max_rel = rel;
      report_->worst = id;
    }
  }

  std::string a_name_, b_name_;
  ModelDiff* report_;
};

}  // namespace

ModelDiff CompareModels(const caffe::NetParameter& a, const caffe::NetParameter& b,
                        const std::string& a_name, const std::string& b_name) {
  ModelDiff report;
  const auto a_layers = LayersWithBlobs(a, a_name, &report);
  const auto b_layers = LayersWithBlobs(b, b_name, &report);
  Comparison compare(a_name, b_name, &report);
  const auto only_in = [&](const caffe::LayerParameter& layer, const std::string& side,
                           const std::string& other_side) {
    compare.Mismatch("layer '" + layer.name() + "' has " + Count(layer.blobs_size(), "blob") +
                     " in " + side + " and none in " + other_side);
  };
  for (const auto& layer : a.layer()) {  // in A's order
    if (layer.blobs_size() == 0 || a_layers.at(layer.name()) != &layer) continue;
    auto other = b_layers.find(layer.name());
    if (other == b_layers.end()) {
      only_in(layer, a_name, b_name);
    } else {
      compare.Layers(layer, *other->second);
    }
  }
  for (const auto& layer : b.layer()) {
    if (layer.blobs_size() == 0 || b_layers.at(layer.name()) != &layer) continue;
    if (a_layers.count(layer.name()) == 0) only_in(layer, b_name, a_name);
  }
  if (!report.mismatches.empty()) {
    report.max_abs = std::numeric_limits<double>::infinity();
    report.max_rel = std::numeric_limits<double>::infinity();
  }
  return report;
}

Result<ModelDiff> CompareModelFiles(const std::string& a_path, const std::string& b_path) {
  caffe::NetParameter a, b;
  PSTRAIN_RETURN_IF_ERROR(ReadCaffemodelFile(a_path, &a));
  PSTRAIN_RETURN_IF_ERROR(ReadCaffemodelFile(b_path, &b));
  return CompareModels(a, b, a_path, b_path);
}

}  // namespace pstrain
