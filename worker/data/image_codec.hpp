// Images in Caffe's pixel layout, and their PNG/JPEG encodings.
//
// An Image is C x H x W uint8 pixels, planar (channel-major), colour channels
// in B, G, R order: the layout of Caffe's raw Datum records, which hold what
// OpenCV's imread gives (BGR) in CHW order. Decoding uses libpng (simplified
// API) and libjpeg-turbo; encoding writes PNG (lossless) or baseline JPEG.
// None of these functions throws or aborts; errors are Status values whose
// message the caller prefixes with the place (a file, list line or record key).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.hpp"

namespace pstrain {

struct Image {
  int channels = 0;  // 1 (gray) or 3 (B, G, R)
  int height = 0;
  int width = 0;
  std::vector<uint8_t> pixels;  // channels * height * width bytes, planar
};

// How decoding treats colour, as OpenCV's imread flags:
//   kNative: 1 channel for gray images, 3 for colour ones (IMREAD_ANYCOLOR);
//   kColor:  always 3 channels, gray replicated (IMREAD_COLOR);
//   kGray:   always 1 channel, colour converted with
//            Y = 0.299 R + 0.587 G + 0.114 B, rounded (IMREAD_GRAYSCALE).
// An alpha channel is dropped (PNG: composited over black).
enum class ImageColor { kNative, kColor, kGray };

enum class ImageFormat { kUnknown, kPng, kJpeg };

// The format named by the first bytes (PNG signature, JPEG SOI marker).
ImageFormat DetectImageFormat(std::string_view bytes);

// "png" / "jpg" -> format; anything else kUnknown. Case-insensitive; "jpeg"
// and a leading dot accepted.
ImageFormat ParseImageFormat(std::string_view name);

// Decodes a PNG or JPEG held in `bytes`. Errors (code Corruption):
// "not a PNG or JPEG image", "corrupt PNG (<libpng's reason>)",
// "corrupt JPEG (<libjpeg's reason>)", "image too large (W x H)".
Result<Image> DecodeImage(std::string_view bytes, ImageColor color);

// Encodes `image` (1 or 3 channels) as PNG, or as JPEG with `jpeg_quality`
// (1..100; OpenCV's imencode default is 95).
Result<std::string> EncodeImage(const Image& image, ImageFormat format, int jpeg_quality = 95);

// Bilinear resize with OpenCV's INTER_LINEAR sample positions
// (src = (dst + 0.5) * scale - 0.5, clamped at the borders), rounded to the
// nearest integer. REQUIRES: height, width > 0.
Image ResizeImage(const Image& image, int height, int width);

// Converts between 1 and 3 channels as ImageColor describes (kNative: unchanged).
Image ConvertImageColor(Image image, ImageColor color);

}  // namespace pstrain
