#include "worker/data/npy_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cctype>
#include <cerrno>
#include <cstring>

namespace pstrain {
namespace {

static_assert(std::endian::native == std::endian::little,
              "NpyFile reads little-endian values in place");

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;

// A cursor over the header's dict literal, e.g.
// {'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), }
class HeaderParser {
 public:
  explicit HeaderParser(const std::string& text) : text_(text) {}

  void SkipSpace() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool Take(char c) {
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool AtEnd() {
    SkipSpace();
    return pos_ >= text_.size();
  }
  char Peek() {
    SkipSpace();
    return pos_ < text_.size() ? text_[pos_] : '\0';
  }
  bool String(std::string* out) {
    SkipSpace();
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"')) return false;
    const char quote = text_[pos_++];
    const size_t end = text_.find(quote, pos_);
    if (end == std::string::npos) return false;
    *out = text_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return true;
  }
  bool Word(const char* word) {
    SkipSpace();
    const size_t n = std::strlen(word);
    if (text_.compare(pos_, n, word) != 0) return false;
    pos_ += n;
    return true;
  }
  bool Integer(int64_t* out) {
    SkipSpace();
    size_t start = pos_;
    int64_t value = 0;
    while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
      if (value > (INT64_MAX - 9) / 10) return false;
      value = value * 10 + (text_[pos_++] - '0');
    }
    if (pos_ == start) return false;
    if (pos_ < text_.size() && text_[pos_] == 'L') ++pos_;  // Python 2's long
    *out = value;
    return true;
  }

 private:
  const std::string& text_;
  size_t pos_ = 0;
};

uint32_t LittleEndian(const unsigned char* p, int bytes) {
  uint32_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

template <typename T>
void Convert(const unsigned char* values, int64_t first, int64_t n, float* out) {
  const unsigned char* p = values + first * static_cast<int64_t>(sizeof(T));
  for (int64_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, p + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
    out[i] = static_cast<float>(v);
  }
}

}  // namespace

Result<std::unique_ptr<NpyFile>> NpyFile::Open(const std::string& path) {
  std::unique_ptr<NpyFile> file(new NpyFile(path));
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return Status::NotFound(path + ": no such file");
    return Status::IOError(path + ": cannot read: " + std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const std::string why = S_ISDIR(st.st_mode) ? "a directory" : std::strerror(errno);
    ::close(fd);
    return Status::IOError(path + ": cannot read: " + why);
  }
  const size_t size = static_cast<size_t>(st.st_size);
  if (size > 0) {
    void* map = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {
      const std::string why = std::strerror(errno);
      ::close(fd);
      return Status::IOError(path + ": cannot map: " + why);
    }
    file->map_ = map;
    file->map_size_ = size;
  }
  ::close(fd);  // the mapping keeps the file
  PSTRAIN_RETURN_IF_ERROR(file->ParseHeader(size));
  return file;
}

NpyFile::~NpyFile() {
  if (map_ != nullptr) ::munmap(map_, map_size_);
}

Status NpyFile::ParseHeader(size_t file_size) {
  const auto* bytes = static_cast<const unsigned char*>(map_);
  if (file_size < kMagicSize + 4 || std::memcmp(bytes, kMagic, kMagicSize) != 0) {
    return Status::Corruption(path_ + ": not a .npy file (no \\x93NUMPY magic)");
  }
  const int major = bytes[6];
  const int minor = bytes[7];
  if ((major != 1 && major != 2 && major != 3) || minor != 0) {
    return Status::Corruption(path_ + ": .npy version " + std::to_string(major) + "." +
                              std::to_string(minor) + " (reads 1.0, 2.0 and 3.0)");
  }
  const int length_bytes = major == 1 ? 2 : 4;
  const size_t header_start = kMagicSize + 2 + length_bytes;
  if (file_size < header_start) return Status::Corruption(path_ + ": truncated .npy header");
  const size_t header_length = LittleEndian(bytes + 8, length_bytes);
  if (file_size - header_start < header_length) {
    return Status::Corruption(path_ + ": truncated .npy header");
  }
  const std::string header(reinterpret_cast<const char*>(bytes + header_start), header_length);
  const auto bad = [&](const std::string& what) {
    return Status::Corruption(path_ + ": bad .npy header (" + what + "): " + header);
  };

  HeaderParser parser(header);
  if (!parser.Take('{')) return bad("not a dict");
  bool have_descr = false, have_order = false, have_shape = false, fortran = false;
  while (!parser.Take('}')) {
    std::string key;
    if (!parser.String(&key) || !parser.Take(':')) return bad("expected 'key': value");
    if (key == "descr") {
      if (parser.Peek() == '[') {
        return Status::InvalidArgument(path_ +
                                       ": structured dtype; a plain numeric dtype is "
                                       "needed ('<f4', '<f8', '<i4', ...)");
      }
      if (!parser.String(&descr_)) return bad("'descr' is not a string");
      have_descr = true;
    } else if (key == "fortran_order") {
      if (parser.Word("True")) {
        fortran = true;
      } else if (!parser.Word("False")) {
        return bad("'fortran_order' is not True or False");
      }
      have_order = true;
    } else if (key == "shape") {
      if (!parser.Take('(')) return bad("'shape' is not a tuple");
      shape_.clear();
      while (!parser.Take(')')) {
        int64_t dim = 0;
        if (!parser.Integer(&dim)) return bad("'shape' holds a non-integer");
        shape_.push_back(dim);
        if (!parser.Take(',') && parser.Peek() != ')') return bad("'shape' is not a tuple");
      }
      have_shape = true;
    } else {
      return bad("unknown key '" + key + "'");
    }
    if (!parser.Take(',') && parser.Peek() != '}') return bad("expected ',' or '}'");
  }
  if (!parser.AtEnd()) return bad("text after the dict");
  if (!have_descr || !have_order || !have_shape) {
    return bad("needs 'descr', 'fortran_order' and 'shape'");
  }
  if (fortran) {
    return Status::InvalidArgument(
        path_ + ": fortran_order is True; save a C-order array (numpy.ascontiguousarray)");
  }
  const std::string type = descr_.size() >= 2 ? descr_.substr(1) : "";
  const char order = descr_.empty() ? '\0' : descr_[0];
  const bool one_byte = type == "i1" || type == "u1";
  const bool known = type == "f4" || type == "f8" || type == "i1" || type == "i2" || type == "i4" ||
                     type == "i8" || type == "u1" || type == "u2" || type == "u4" || type == "u8";
  if (!known || !(order == '<' || order == '=' || (order == '|' && one_byte))) {
    return Status::InvalidArgument(path_ + ": dtype '" + descr_ +
                                   "' is not read (float32/64 or 8- to 64-bit integers, "
                                   "little-endian)");
  }
  kind_ = type[0] == 'f' ? Kind::kFloat : type[0] == 'i' ? Kind::kSigned : Kind::kUnsigned;
  item_size_ = type[1] - '0';
  if (shape_.empty()) return Status::InvalidArgument(path_ + ": a scalar; an array is needed");
  count_ = 1;
  for (int64_t dim : shape_) {
    if (dim != 0 && count_ > INT64_MAX / 8 / dim) {
      return bad("shape " + ShapeString() + " is too large");
    }
    count_ *= dim;
  }
  const size_t data_start = header_start + header_length;
  const uint64_t need = static_cast<uint64_t>(count_) * static_cast<uint64_t>(item_size_);
  if (file_size - data_start < need) {
    return Status::Corruption(path_ + ": truncated: shape " + ShapeString() + " of '" + descr_ +
                              "' needs " + std::to_string(need) + " bytes of data, the file has " +
                              std::to_string(file_size - data_start));
  }
  values_ = bytes + data_start;
  return Status::Ok();
}

std::string NpyFile::ShapeString() const {
  std::string s = "(";
  for (size_t i = 0; i < shape_.size(); ++i) {
    s += (i ? ", " : "") + std::to_string(shape_[i]);
  }
  return s + (shape_.size() == 1 ? ",)" : ")");
}

void NpyFile::ReadFloats(int64_t first, int64_t n, float* out) const {
  switch (kind_) {
    case Kind::kFloat:
      if (item_size_ == 4) {
        std::memcpy(out, values_ + first * 4, static_cast<size_t>(n) * 4);
      } else {
        Convert<double>(values_, first, n, out);
      }
      return;
    case Kind::kSigned:
      if (item_size_ == 1) return Convert<int8_t>(values_, first, n, out);
      if (item_size_ == 2) return Convert<int16_t>(values_, first, n, out);
      if (item_size_ == 4) return Convert<int32_t>(values_, first, n, out);
      return Convert<int64_t>(values_, first, n, out);
    case Kind::kUnsigned:
      if (item_size_ == 1) return Convert<uint8_t>(values_, first, n, out);
      if (item_size_ == 2) return Convert<uint16_t>(values_, first, n, out);
      if (item_size_ == 4) return Convert<uint32_t>(values_, first, n, out);
      return Convert<uint64_t>(values_, first, n, out);
  }
}

}  // namespace pstrain
