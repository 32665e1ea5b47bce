#include "common/proto_io.hpp"

#include <fcntl.h>
#include <google/protobuf/descriptor.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <google/protobuf/stubs/logging.h>
#include <google/protobuf/text_format.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

namespace pstrain {
namespace {

// Keeps the first parse error with its position.
class FirstErrorCollector : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    if (!has_error_) {
      has_error_ = true;
      line_ = line + 1;
      column_ = column + 1;
      message_ = message;
    }
  }
  void AddWarning(int, google::protobuf::io::ColumnNumber, const std::string&) override {}
  bool has_error() const { return has_error_; }
  std::string Describe(const std::string& name) const {
    return name + ":" + std::to_string(line_) + ":" + std::to_string(column_) + ": " + message_;
  }

 private:
  bool has_error_ = false;
  int line_ = 0;
  int column_ = 0;
  std::string message_;
};

Status ParseWithParser(google::protobuf::TextFormat::Parser& parser, const std::string& text,
                       const std::string& name, google::protobuf::Message* message) {
  FirstErrorCollector errors;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(text, message)) {
    if (errors.has_error()) return Status::InvalidArgument(errors.Describe(name));
    return Status::InvalidArgument(name + ": not a valid " + message->GetTypeName() + " text file");
  }
  return Status::Ok();
}

// A file that cannot be opened: NotFound when it does not exist, else IOError.
Status OpenError(const std::string& path, int err, const char* verb = "open") {
  const std::string message = path + ": cannot " + verb + " (" + std::strerror(err) + ")";
  if (err == ENOENT || err == ENOTDIR) return Status::NotFound(message);
  return Status::IOError(message);
}

}  // namespace

void SilenceProtobufLogs() {
  google::protobuf::SetLogHandler(
      [](google::protobuf::LogLevel, const char*, int, const std::string&) {});
}

bool FileExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

Status ReadFileToString(const std::string& path, std::string* contents) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return OpenError(path, errno);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) return Status::IOError(path + ": read error");
  *contents = buffer.str();
  return Status::Ok();
}

Status ParseTextProto(const std::string& text, const std::string& name,
                      google::protobuf::Message* message) {
  google::protobuf::TextFormat::Parser parser;
  return ParseWithParser(parser, text, name, message);
}

Status ReadTextProto(const std::string& path, google::protobuf::Message* message) {
  std::string text;
  PSTRAIN_RETURN_IF_ERROR(ReadFileToString(path, &text));
  return ParseTextProto(text, path, message);
}

namespace {

// Reads and parses `path` into `message`, recording where each field was.
Status ReadTextProtoWithLocations(const std::string& path, google::protobuf::Message* message,
                                  google::protobuf::TextFormat::ParseInfoTree* tree) {
  std::string text;
  PSTRAIN_RETURN_IF_ERROR(ReadFileToString(path, &text));
  google::protobuf::TextFormat::Parser parser;
  parser.WriteLocationsTo(tree);
  return ParseWithParser(parser, text, path, message);
}

}  // namespace

Status ReadTextProtoWithLines(const std::string& path, google::protobuf::Message* message,
                              const std::string& repeated_field, std::vector<int>* lines) {
  google::protobuf::TextFormat::ParseInfoTree tree;
  PSTRAIN_RETURN_IF_ERROR(ReadTextProtoWithLocations(path, message, &tree));
  lines->clear();
  const auto* field = message->GetDescriptor()->FindFieldByName(repeated_field);
  if (field == nullptr || !field->is_repeated()) return Status::Ok();
  const int n = message->GetReflection()->FieldSize(*message, field);
  for (int i = 0; i < n; ++i) lines->push_back(tree.GetLocation(field, i).line + 1);
  return Status::Ok();
}

Status ReadTextProtoWithFieldLines(const std::string& path, google::protobuf::Message* message,
                                   std::map<std::string, int>* lines) {
  google::protobuf::TextFormat::ParseInfoTree tree;
  PSTRAIN_RETURN_IF_ERROR(ReadTextProtoWithLocations(path, message, &tree));
  lines->clear();
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  message->GetReflection()->ListFields(*message, &fields);
  for (const auto* field : fields) {
    const auto location = tree.GetLocation(field, field->is_repeated() ? 0 : -1);
    if (location.line >= 0) (*lines)[field->name()] = location.line + 1;
  }
  return Status::Ok();
}

Status ReadBinaryProto(const std::string& path, google::protobuf::Message* message) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return OpenError(path, errno);
  google::protobuf::io::FileInputStream raw(fd);
  raw.SetCloseOnDelete(true);
  google::protobuf::io::CodedInputStream coded(&raw);
  coded.SetTotalBytesLimit(INT_MAX);
  if (!message->ParseFromCodedStream(&coded) || !coded.ConsumedEntireMessage()) {
    return Status::Corruption(path + ": not a valid binary " + message->GetTypeName() +
                              " (truncated or corrupt)");
  }
  return Status::Ok();
}

namespace {

// The temporary file beside `path`: "<path>.tmp.<16 random hex digits>",
// created with O_EXCL | O_NOFOLLOW (a name that exists, a symlink planted by
// another user included, is never opened: a fresh name is drawn instead), mode
// 0644 less the umask as before. `path` may lie in a shared folder (a
// snapshot_prefix under /tmp): a predictable name opened with O_TRUNC there
// would let another user point it at any file of ours (docs/security.md).
int CreateTemporaryBeside(const std::string& path, std::string* tmp) {
  for (int attempt = 0; attempt < 100; ++attempt) {
    uint64_t token = 0;
    if (::getrandom(&token, sizeof token, 0) != static_cast<ssize_t>(sizeof token)) return -1;
    char suffix[24];
    std::snprintf(suffix, sizeof suffix, ".tmp.%016llx", static_cast<unsigned long long>(token));
    *tmp = path + suffix;
    const int fd = ::open(tmp->c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd >= 0 || errno != EEXIST) return fd;
  }
  return -1;
}

}  // namespace

Status WriteFileAtomically(const std::string& path, const std::string& contents) {
  std::string tmp;
  const int fd = CreateTemporaryBeside(path, &tmp);
  if (fd < 0) return OpenError(path, errno, "create");
  size_t done = 0;
  while (done < contents.size()) {
    ssize_t n = ::write(fd, contents.data() + done, contents.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      std::string why = std::strerror(errno);
      ::close(fd);
      ::unlink(tmp.c_str());
      return Status::IOError(path + ": write failed (" + why + ")");
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    ::unlink(tmp.c_str());
    return Status::IOError(path + ": cannot flush to disk");
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string why = std::strerror(errno);
    ::unlink(tmp.c_str());
    return Status::IOError(path + ": cannot rename into place (" + why + ")");
  }
  return Status::Ok();
}

Status WriteTextProto(const google::protobuf::Message& message, const std::string& path) {
  std::string text;
  if (!google::protobuf::TextFormat::PrintToString(message, &text)) {
    return Status::Error(path + ": cannot format " + message.GetTypeName());
  }
  return WriteFileAtomically(path, text);
}

Status WriteBinaryProto(const google::protobuf::Message& message, const std::string& path) {
  std::string bytes;
  if (!message.SerializeToString(&bytes)) {
    return Status::Error(path + ": cannot serialize " + message.GetTypeName());
  }
  return WriteFileAtomically(path, bytes);
}

}  // namespace pstrain
