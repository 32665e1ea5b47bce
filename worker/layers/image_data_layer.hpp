// ImageData (Caffe's ImageDataLayer): batches of PNG/JPEG files named by a
// list, decoded, resized and transformed as the Data layer transforms records.
//
// image_data_param: source (a list of lines "relative/path label", read as
// `ps-data images` reads it: worker/data/image_set.hpp), root_folder (prefixed
// to each path as a string, as Caffe), batch_size, shuffle, new_height and
// new_width (both 0, or both > 0: every image resized to them, bilinearly
// with OpenCV's INTER_LINEAR sample positions: worker/data/image_codec.hpp),
// is_color (3 channels B, G, R, gray replicated; false: 1 channel, gray =
// 0.299 R + 0.587 G + 0.114 B), rand_skip. transform_param as Data (the
// deprecated scale, mean_file, crop_size and mirror of image_data_param are
// used where transform_param leaves them unset). Tops: data (B x C x H' x W')
// and label (B).
//
// Stream and sharding as the Data layer: worker w of W with batch B reads, at
// global step t, positions [(t*W + w)*B, (t*W + w + 1)*B) of the stream, which
// is the list in order, around again after the last line. shuffle shuffles the
// list at the start and again at every pass, as Caffe does, but seeded (net
// seed, layer name, pass), so every worker and every run sees the same order.
// rand_skip starts the stream that many lines in, a number drawn once from
// the seed in [0, rand_skip) (Caffe draws it unseeded); it must be below the
// list's length. Transform draws (mirror, crop) are seeded by the sample's
// stream position, as Data's.
//
// The first image (after the skip) fixes C x H x W; an image of another size
// (after resizing) stops the run naming the list line and file. Caffe instead
// takes each batch's shape from its first image, which lets batch_size 1 read
// images of any size. Images are read and decoded in Forward, no prefetch
// thread. Errors met at set-up (list, first image, transform_param) are
// returned by SetUp; a later image that does not read or decode is the
// layer's RuntimeStatus (sticky; that batch is not delivered).
#pragma once

#include <string>
#include <vector>

#include "worker/data/image_codec.hpp"
#include "worker/data/image_set.hpp"
#include "worker/data/transform.hpp"
#include "worker/layers/stream_data_layer.hpp"

namespace pstrain {

class ImageDataLayer : public StreamDataLayer {
 public:
  using StreamDataLayer::StreamDataLayer;

  const char* type() const override { return "ImageData"; }
  Status LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  Status Reshape(const BlobVec& bottom, const BlobVec& top) override;
  int MinTopBlobs() const override { return 1; }
  int MaxTopBlobs() const override { return 2; }
  // Lines of the list.
  int64_t line_count() const { return static_cast<int64_t>(lines_.size()); }
  // The list line at stream position p (after the skip and the shuffles).
  const ListEntry& LineAt(int64_t p);

 private:
  // Reads, decodes and resizes the image of `entry` into datum_ (raw, B G R planes).
  Status Load(const ListEntry& entry);
  Status ReadBatch(int64_t t, const BlobVec& top) override;

  std::vector<ListEntry> lines_;
  std::string root_;
  std::string list_;
  int batch_size_ = 0;
  int new_height_ = 0, new_width_ = 0;
  ImageColor color_ = ImageColor::kColor;
  bool shuffle_ = false;
  int64_t skip_ = 0;
  uint64_t seed_ = 0;
  std::vector<int> shape_;  // C, H, W of the first image
  std::unique_ptr<DataTransformer> transformer_;
  caffe::Datum datum_;

  int64_t ordered_epoch_ = -1;
  std::vector<int64_t> order_;  // list lines of pass ordered_epoch_, in stream order

};

}  // namespace pstrain
