// Model comparison: how far apart the learned blobs of two nets are (the
// contents of two .caffemodel files), as `ps-net diff` reports it and every
// end-to-end weight comparison relies on.
//
// Layers are matched by name, blobs by index within the layer; layers
// without blobs in either file are skipped. For each blob pair:
//   abs = max |a[k] - b[k]|,  rel = abs / max |a[k]|, |b[k]| (0 when all are 0)
// and the report holds the largest of each over all pairs. Anything that is
// not a finite difference is a mismatch, named in `mismatches`: a value that
// is NaN on either side (NaN never equals anything, not even NaN), an
// infinity facing anything but the same infinity, a layer or blob present in
// one file only, shapes that differ (legacy num/channels/height/width and a
// shape field agree when they agree padded with 1s on the left to 4 axes),
// a blob whose value count does not match its shape. With any mismatch,
// max_abs and max_rel are +infinity.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.hpp"
#include "proto/caffe.pb.h"

namespace pstrain {

struct ModelDiff {
  int blobs_compared = 0;  // blob pairs whose values were compared
  double max_abs = 0;
  double max_rel = 0;
  std::string worst;                    // "<layer>/<blob index>" of the largest rel
  std::vector<std::string> mismatches;  // one line each, naming layer and blob

  // No mismatch and max_rel <= max_rel_allowed (0: every value equal).
  bool Equal(double max_rel_allowed = 0) const {
    return mismatches.empty() && max_rel <= max_rel_allowed;
  }
};

// `a_name` and `b_name` name the two sides in mismatch lines (file names).
ModelDiff CompareModels(const caffe::NetParameter& a, const caffe::NetParameter& b,
                        const std::string& a_name = "A", const std::string& b_name = "B");

// Reads two binary .caffemodel files and compares them. Errors: a file that
// cannot be read or parsed (the message names it).
Result<ModelDiff> CompareModelFiles(const std::string& a_path, const std::string& b_path);

}  // namespace pstrain
