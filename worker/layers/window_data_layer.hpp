// WindowData (Caffe's WindowDataLayer, R-CNN's fine-tuning input): batches of
// image windows (boxes) named by a window file, each cut out of its image with
// context padding, warped to crop_size x crop_size, maybe mirrored, and
// mean-subtracted and scaled. Tops: data (B x 3 x crop x crop) and label (B).
//
// The window file (window_data_param.source) repeats one block per image,
// whitespace-separated as Caffe reads it:
//     # image_index          (0, 1, 2, ... in order)
//     img_path               (root_folder + img_path, as a string)
//     channels height width  (channels must be 3: Caffe reads every image as colour)
//     num_windows
//     class_index overlap x1 y1 x2 y2   (num_windows lines; pixel corners, inclusive)
// A window with overlap >= fg_threshold is foreground (class_index must be
// > 0), one with overlap < bg_threshold is background (label 0), one between is
// unused. Each batch takes num_fg = int(float(B) * fg_fraction) foreground
// windows after B - num_fg background ones, as Caffe; each window is drawn
// uniformly, with replacement, from its set.
//
// The crop, as Caffe: with context_pad > 0 or crop_mode "square" the window is
// widened (square: to its longer side) and scaled by crop / (crop - 2 *
// context_pad) about its centre (float arithmetic, coordinates rounded), the
// part inside the image is warped (worker/data/image_codec.hpp ResizeImage,
// as ImageData resizes) to its share of the crop, and the share outside stays
// 0 (after mirroring, the padding mirrors too). crop_mode "warp" with
// context_pad 0 warps the window to the whole crop. Then out = (pixel - mean)
// * scale, with mean the mean_file value at the output pixel's position offset
// by ((mean width - crop) / 2) on both axes, or the channel's mean_value, or 0.
//
// Parameters: crop_size, mirror and mean_file come from transform_param, or
// from window_data_param's deprecated fields where transform_param leaves them
// unset (ps's upgrade moves those); likewise scale (Caffe reads only
// window_data_param.scale). mean_value from transform_param. crop and mirror
// apply in every phase, as Caffe.
//
// Stream and sharding: background and foreground windows are two streams.
// Worker w of W at global step t draws background positions [(t*W + w)*G,
// (t*W + w + 1)*G) and foreground positions [(t*W + w)*F, (t*W + w + 1)*F)
// (G = B - F, F = num_fg); the window and the mirror of stream position q are
// drawn from a generator seeded by (net seed, layer name, stream, q). So W
// workers with batch B draw the windows one worker with batch W*B draws
// whenever B * fg_fraction is a whole number (the batch's order differs).
//
// Everything is checked at set-up: the parameters, each line of the window
// file, every image decoded once (readable, of the size the file gives) and
// every window inside its image; errors name "<file>:<line>". cache_images
// keeps the decoded images in memory; otherwise each batch reads its images
// again, in Forward (no prefetch thread), and an image that no longer reads
// is the layer's RuntimeStatus (sticky; that batch is not delivered).
#pragma once

#include <string>
#include <vector>

#include "worker/data/image_codec.hpp"
#include "worker/layers/stream_data_layer.hpp"

namespace pstrain {

class WindowDataLayer : public StreamDataLayer {
 public:
  using StreamDataLayer::StreamDataLayer;

  struct Window {
    int image = 0;  // index into images_
    int label = 0;
    float overlap = 0;
    int x1 = 0, y1 = 0, x2 = 0, y2 = 0;
  };
  struct WindowImage {
    std::string path;  // root_folder + the file's path
    int height = 0, width = 0;
    int line = 0;  // the path's line in the window file
  };

  const char* type() const override { return "WindowData"; }
  Status LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  Status Reshape(const BlobVec& bottom, const BlobVec& top) override;
  int MinTopBlobs() const override { return 1; }
  int MaxTopBlobs() const override { return 2; }

  const std::vector<Window>& foreground() const { return fg_; }
  const std::vector<Window>& background() const { return bg_; }
  int foreground_per_batch() const { return num_fg_; }

 private:
  Status ReadWindowFile(const std::string& file, const std::string& root);
  Result<Image> LoadImage(const WindowImage& image) const;
  // Writes sample `window` (mirrored or not) to out (3 x crop x crop floats).
  void CropWindow(const Image& image, const Window& window, bool mirror, float* out) const;
  Status ReadBatch(int64_t t, const BlobVec& top) override;

  std::string source_;
  std::vector<WindowImage> images_;
  std::vector<Image> cache_;  // decoded images_, with cache_images
  std::vector<Window> fg_, bg_;
  int batch_size_ = 0;
  int num_fg_ = 0;
  int crop_ = 0;
  int context_pad_ = 0;
  bool square_ = false;
  bool mirror_ = false;
  float scale_ = 1.f;
  std::vector<float> mean_image_;  // mean_file values, or empty
  int mean_height_ = 0, mean_width_ = 0, mean_off_ = 0;
  std::vector<float> mean_channel_;  // mean_value per channel, or empty
  uint64_t seed_ = 0;

};

}  // namespace pstrain
