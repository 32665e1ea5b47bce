#include "worker/data/image_codec.hpp"

// clang-format off
#include <cstdio>  // jpeglib.h needs FILE and size_t first
#include <jpeglib.h>
// clang-format on
#include <png.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <csetjmp>
#include <cstring>

namespace pstrain {
namespace {

// Larger images are refused rather than allocated (64 Mpixel).
constexpr int64_t kMaxPixels = int64_t{1} << 26;

Status TooLarge(int64_t width, int64_t height) {
  return Status::Corruption("image too large (" + std::to_string(width) + " x " +
                            std::to_string(height) + ")");
}

// Interleaved (HWC) <-> planar (CHW).
std::vector<uint8_t> ToPlanar(const uint8_t* hwc, int c, int h, int w) {
  std::vector<uint8_t> out(static_cast<size_t>(c) * h * w);
  const size_t plane = static_cast<size_t>(h) * w;
  for (size_t p = 0; p < plane; ++p) {
    for (int k = 0; k < c; ++k) out[k * plane + p] = hwc[p * c + k];
  }
  return out;
}

std::vector<uint8_t> ToInterleaved(const Image& image) {
  const int c = image.channels;
  const size_t plane = static_cast<size_t>(image.height) * image.width;
  std::vector<uint8_t> out(plane * c);
  for (size_t p = 0; p < plane; ++p) {
    for (int k = 0; k < c; ++k) out[p * c + k] = image.pixels[k * plane + p];
  }
  return out;
}

// ---- JPEG (libjpeg-turbo) ----

// libjpeg reports errors through error_exit, which must not return: it jumps
// back to the setjmp in the caller with the message kept.
struct JpegError {
  jpeg_error_mgr base;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void JpegErrorExit(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<JpegError*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}

void JpegSilence(j_common_ptr, int) {}  // warnings (e.g. extraneous bytes) are not errors

// Everything with a destructor lives outside the setjmp scope.
Result<Image> DecodeJpeg(std::string_view bytes, ImageColor color) {
  jpeg_decompress_struct cinfo;
  JpegError err;
  cinfo.err = jpeg_std_error(&err.base);
  err.base.error_exit = JpegErrorExit;
  err.base.emit_message = JpegSilence;
  Image image;
  std::vector<uint8_t> hwc;
  if (setjmp(err.jump) != 0) {
    jpeg_destroy_decompress(&cinfo);
    return Status::Corruption(std::string("corrupt JPEG (") + err.message + ")");
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, reinterpret_cast<const unsigned char*>(bytes.data()),
               static_cast<unsigned long>(bytes.size()));
  jpeg_read_header(&cinfo, TRUE);
  const bool source_gray = cinfo.jpeg_color_space == JCS_GRAYSCALE;
  const bool gray = color == ImageColor::kGray || (color == ImageColor::kNative && source_gray);
  cinfo.out_color_space = gray ? JCS_GRAYSCALE : JCS_EXT_BGR;
  if (int64_t{cinfo.image_width} * cinfo.image_height > kMaxPixels) {
    const int64_t w = cinfo.image_width, h = cinfo.image_height;
    jpeg_destroy_decompress(&cinfo);
    return TooLarge(w, h);
  }
  jpeg_start_decompress(&cinfo);
  image.channels = gray ? 1 : 3;
  image.height = static_cast<int>(cinfo.output_height);
  image.width = static_cast<int>(cinfo.output_width);
  const size_t stride = static_cast<size_t>(image.width) * image.channels;
  hwc.resize(stride * image.height);
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW row = hwc.data() + stride * cinfo.output_scanline;
    jpeg_read_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  image.pixels = ToPlanar(hwc.data(), image.channels, image.height, image.width);
  return image;
}

Result<std::string> EncodeJpeg(const Image& image, int quality) {
  jpeg_compress_struct cinfo;
  JpegError err;
  cinfo.err = jpeg_std_error(&err.base);
  err.base.error_exit = JpegErrorExit;
  err.base.emit_message = JpegSilence;
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  const std::vector<uint8_t> hwc = ToInterleaved(image);
  if (setjmp(err.jump) != 0) {
    jpeg_destroy_compress(&cinfo);
    std::free(buffer);
    return Status::Error(std::string("cannot encode JPEG (") + err.message + ")");
  }
  jpeg_create_compress(&cinfo);
  jpeg_mem_dest(&cinfo, &buffer, &size);
  cinfo.image_width = static_cast<JDIMENSION>(image.width);
  cinfo.image_height = static_cast<JDIMENSION>(image.height);
  cinfo.input_components = image.channels;
  cinfo.in_color_space = image.channels == 1 ? JCS_GRAYSCALE : JCS_EXT_BGR;
  jpeg_set_defaults(&cinfo);
  jpeg_set_quality(&cinfo, std::clamp(quality, 1, 100), TRUE);
  jpeg_start_compress(&cinfo, TRUE);
  const size_t stride = static_cast<size_t>(image.width) * image.channels;
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW row = const_cast<uint8_t*>(hwc.data()) + stride * cinfo.next_scanline;
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  jpeg_destroy_compress(&cinfo);
  std::string out(reinterpret_cast<const char*>(buffer), size);
  std::free(buffer);
  return out;
}

// ---- PNG (libpng's simplified API) ----

Result<Image> DecodePng(std::string_view bytes, ImageColor color) {
  png_image png;
  std::memset(&png, 0, sizeof(png));
  png.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_memory(&png, bytes.data(), bytes.size())) {
    const std::string why = png.message;
    png_image_free(&png);
    return Status::Corruption("corrupt PNG (" + why + ")");
  }
  if (int64_t{png.width} * png.height > kMaxPixels) {
    const int64_t w = png.width, h = png.height;
    png_image_free(&png);
    return TooLarge(w, h);
  }
  const bool source_color = (png.format & PNG_FORMAT_FLAG_COLOR) != 0;
  // Colour sources are read as BGR and converted to gray here, with the
  // weights kGray documents; gray sources are read as gray.
  const bool read_color = source_color;
  png.format = read_color ? PNG_FORMAT_BGR : PNG_FORMAT_GRAY;
  Image image;
  image.channels = read_color ? 3 : 1;
  image.height = static_cast<int>(png.height);
  image.width = static_cast<int>(png.width);
  std::vector<uint8_t> hwc(PNG_IMAGE_SIZE(png));
  if (!png_image_finish_read(&png, nullptr, hwc.data(), 0, nullptr)) {
    const std::string why = png.message;
    png_image_free(&png);
    return Status::Corruption("corrupt PNG (" + why + ")");
  }
  image.pixels = ToPlanar(hwc.data(), image.channels, image.height, image.width);
  return ConvertImageColor(std::move(image), color);
}

Result<std::string> EncodePng(const Image& image) {
  png_image png;
  std::memset(&png, 0, sizeof(png));
  png.version = PNG_IMAGE_VERSION;
  png.width = static_cast<png_uint_32>(image.width);
  png.height = static_cast<png_uint_32>(image.height);
  png.format = image.channels == 1 ? PNG_FORMAT_GRAY : PNG_FORMAT_BGR;
  const std::vector<uint8_t> hwc = ToInterleaved(image);
  png_alloc_size_t size = 0;
  if (!png_image_write_get_memory_size(png, size, 0, hwc.data(), 0, nullptr)) {
    const std::string why = png.message;
    png_image_free(&png);
    return Status::Error("cannot encode PNG (" + why + ")");
  }
  std::string out(size, '\0');
  if (!png_image_write_to_memory(&png, out.data(), &size, 0, hwc.data(), 0, nullptr)) {
    const std::string why = png.message;
    png_image_free(&png);
    return Status::Error("cannot encode PNG (" + why + ")");
  }
  out.resize(size);
  return out;
}

}  // namespace

ImageFormat DetectImageFormat(std::string_view bytes) {
  static constexpr unsigned char kPng[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (bytes.size() >= 8 && std::memcmp(bytes.data(), kPng, 8) == 0) return ImageFormat::kPng;
  if (bytes.size() >= 3 && static_cast<unsigned char>(bytes[0]) == 0xff &&
      static_cast<unsigned char>(bytes[1]) == 0xd8 &&
      static_cast<unsigned char>(bytes[2]) == 0xff) {
    return ImageFormat::kJpeg;
  }
  return ImageFormat::kUnknown;
}

ImageFormat ParseImageFormat(std::string_view name) {
  std::string lower;
  for (char c : name) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (!lower.empty() && lower[0] == '.') lower.erase(0, 1);
  if (lower == "png") return ImageFormat::kPng;
  if (lower == "jpg" || lower == "jpeg") return ImageFormat::kJpeg;
  return ImageFormat::kUnknown;
}

Result<Image> DecodeImage(std::string_view bytes, ImageColor color) {
  switch (DetectImageFormat(bytes)) {
    case ImageFormat::kPng:
      return DecodePng(bytes, color);
    case ImageFormat::kJpeg:
      return DecodeJpeg(bytes, color);
    case ImageFormat::kUnknown:
      break;
  }
  return Status::Corruption("not a PNG or JPEG image");
}

Result<std::string> EncodeImage(const Image& image, ImageFormat format, int jpeg_quality) {
  if ((image.channels != 1 && image.channels != 3) || image.height <= 0 || image.width <= 0) {
    return Status::InvalidArgument("cannot encode an image of " + std::to_string(image.channels) +
                                   " x " + std::to_string(image.height) + " x " +
                                   std::to_string(image.width));
  }
  switch (format) {
    case ImageFormat::kPng:
      return EncodePng(image);
    case ImageFormat::kJpeg:
      return EncodeJpeg(image, jpeg_quality);
    case ImageFormat::kUnknown:
      break;
  }
  return Status::InvalidArgument("unknown image format (expected png or jpg)");
}

Image ConvertImageColor(Image image, ImageColor color) {
  const size_t plane = static_cast<size_t>(image.height) * image.width;
  if (color == ImageColor::kGray && image.channels == 3) {
    // OpenCV's fixed-point weights (14 bits) for B, G, R.
    std::vector<uint8_t> gray(plane);
    const uint8_t* b = image.pixels.data();
    const uint8_t* g = b + plane;
    const uint8_t* r = g + plane;
    for (size_t p = 0; p < plane; ++p) {
      gray[p] = static_cast<uint8_t>((b[p] * 1868 + g[p] * 9617 + r[p] * 4899 + (1 << 13)) >> 14);
    }
    image.pixels = std::move(gray);
    image.channels = 1;
  } else if (color == ImageColor::kColor && image.channels == 1) {
    std::vector<uint8_t> bgr(plane * 3);
    for (int k = 0; k < 3; ++k) std::copy_n(image.pixels.begin(), plane, bgr.begin() + k * plane);
    image.pixels = std::move(bgr);
    image.channels = 3;
  }
  return image;
}

Image ResizeImage(const Image& image, int height, int width) {
  // Per output coordinate: the two source indices and the weight of the second.
  struct Tap {
    int i0, i1;
    float f;
  };
  auto taps = [](int src, int dst) {
    std::vector<Tap> out(static_cast<size_t>(dst));
    const double scale = static_cast<double>(src) / dst;
    for (int d = 0; d < dst; ++d) {
      double s = (d + 0.5) * scale - 0.5;
      int i0 = static_cast<int>(std::floor(s));
      float f = static_cast<float>(s - i0);
      if (i0 < 0) {
        i0 = 0;
        f = 0.f;
      }
      if (i0 >= src - 1) {
        i0 = src - 1;
        f = 0.f;
      }
      out[static_cast<size_t>(d)] = {i0, std::min(i0 + 1, src - 1), f};
    }
    return out;
  };
  const std::vector<Tap> ys = taps(image.height, height);
  const std::vector<Tap> xs = taps(image.width, width);
  Image out;
  out.channels = image.channels;
  out.height = height;
  out.width = width;
  out.pixels.resize(static_cast<size_t>(image.channels) * height * width);
  const size_t in_plane = static_cast<size_t>(image.height) * image.width;
  for (int c = 0; c < image.channels; ++c) {
    const uint8_t* src = image.pixels.data() + c * in_plane;
    uint8_t* dst = out.pixels.data() + static_cast<size_t>(c) * height * width;
    for (int y = 0; y < height; ++y) {
      const Tap& ty = ys[static_cast<size_t>(y)];
      const uint8_t* r0 = src + static_cast<size_t>(ty.i0) * image.width;
      const uint8_t* r1 = src + static_cast<size_t>(ty.i1) * image.width;
      for (int x = 0; x < width; ++x) {
        const Tap& tx = xs[static_cast<size_t>(x)];
        const float top = r0[tx.i0] + (r0[tx.i1] - r0[tx.i0]) * tx.f;
        const float bottom = r1[tx.i0] + (r1[tx.i1] - r1[tx.i0]) * tx.f;
        const float v = top + (bottom - top) * ty.f;
        dst[static_cast<size_t>(y) * width + x] =
            static_cast<uint8_t>(std::clamp(std::lround(v), 0L, 255L));
      }
    }
  }
  return out;
}

}  // namespace pstrain
