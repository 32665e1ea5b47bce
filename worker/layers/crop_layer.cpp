#include "worker/layers/crop_layer.hpp"

#include <algorithm>
#include <string>

#include "worker/layer_registry.hpp"

namespace pstrain {
namespace {

std::string Str(int64_t v) { return std::to_string(v); }

}  // namespace

Status CropLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  const caffe::CropParameter& p = param_.crop_param();
  const Blob& in = *bottom[0];
  const Blob& like = *bottom[1];
  const int axes = in.num_axes();
  if (p.axis() < -axes || p.axis() >= axes) {
    return Status::Error("crop_param.axis " + Str(p.axis()) + " is outside bottom 0's " +
                         Str(axes) + " axes (" + in.shape_string() + ")");
  }
  if (axes > CropGeometry::kMaxAxes) {
    return Status::Error("bottom 0 has " + Str(axes) + " axes; at most " +
                         Str(CropGeometry::kMaxAxes) + " are supported");
  }
  const int start = in.CanonicalAxisIndex(p.axis());
  if (p.offset_size() > 1 && p.offset_size() != axes - start) {
    return Status::Error("crop_param.offset has " + Str(p.offset_size()) +
                         " values; give one, or one per cropped axis (" + Str(axes - start) +
                         ": axes " + Str(start) + " to " + Str(axes - 1) + ")");
  }
  if (like.num_axes() != axes) {
    return Status::Error("bottom 1 (" + like.shape_string() + ") must have the " + Str(axes) +
                         " axes of bottom 0 (" + in.shape_string() + ")");
  }
  std::vector<int> shape = in.shape();
  geo_.num_axes = axes;
  for (int i = 0; i < axes; ++i) {
    geo_.offset[i] = 0;
    if (i < start) continue;
    const int64_t offset = p.offset_size() == 0   ? 0
                           : p.offset_size() == 1 ? p.offset(0)
                                                  : p.offset(i - start);
    if (offset + like.shape(i) > in.shape(i)) {
      return Status::Error("the crop of axis " + Str(i) + " does not fit: offset " + Str(offset) +
                           " + size " + Str(like.shape(i)) + " (bottom 1) is past bottom 0's " +
                           Str(in.shape(i)) + " (bottom 0 " + in.shape_string() + ", bottom 1 " +
                           like.shape_string() + ")");
    }
    geo_.offset[i] = offset;
    shape[i] = like.shape(i);
  }
  top[0]->Reshape(shape);
  for (int i = 0; i < axes; ++i) {
    geo_.top_stride[i] = top[0]->count(i + 1);
    geo_.bottom_stride[i] = in.count(i + 1);
  }
  return Status::Ok();
}

int64_t CropLayer::BottomRowStart(int64_t row_start) const {
  const int last = geo_.num_axes - 1;
  int64_t rem = row_start;
  int64_t src = geo_.offset[last];
  for (int a = 0; a < last; ++a) {
    src += (rem / geo_.top_stride[a] + geo_.offset[a]) * geo_.bottom_stride[a];
    rem %= geo_.top_stride[a];
  }
  return src;
}

void CropLayer::ForwardReference(const BlobVec& bottom, const BlobVec& top) {
  const int64_t count = top[0]->count();
  if (count == 0) return;
  const int last = geo_.num_axes - 1;
  const int64_t width = top[0]->shape(last);
  const float* x = bottom[0]->cpu_data();
  float* y = top[0]->mutable_cpu_data();
  for (int64_t start = 0; start < count; start += width) {
    const int64_t src = BottomRowStart(start);
    std::copy(x + src, x + src + width, y + start);
  }
}

void CropLayer::BackwardReference(const BlobVec& top, const std::vector<bool>& propagate_down,
                                  const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  float* dx = bottom[0]->mutable_cpu_diff();
  std::fill(dx, dx + bottom[0]->count(), 0.f);
  const int64_t count = top[0]->count();
  if (count == 0) return;
  const int last = geo_.num_axes - 1;
  const int64_t width = top[0]->shape(last);
  const float* dy = top[0]->cpu_diff();
  for (int64_t start = 0; start < count; start += width) {
    const int64_t src = BottomRowStart(start);
    std::copy(dy + start, dy + start + width, dx + src);
  }
}

PSTRAIN_REGISTER_LAYER("Crop", CropLayer);

}  // namespace pstrain
