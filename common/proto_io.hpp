// Reading and writing protobuf files: text (.prototxt) and binary
// (.caffemodel, .solverstate, .binaryproto).
//
// Every read error names the file, and for text files the line and column.
// Writes go to a temporary file in the same folder that is renamed into
// place, so a crash never leaves a half-written file under the final name.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/status.hpp"

namespace google::protobuf {
class Message;
}

namespace pstrain {

Status ReadTextProto(const std::string& path, google::protobuf::Message* message);
// Parses `text` as if it were the file `name` (for errors).
Status ParseTextProto(const std::string& text, const std::string& name,
                      google::protobuf::Message* message);
// Also reports the 1-based line where each element of the repeated field
// `repeated_field` (e.g. "layer") starts, for messages naming the place.
Status ReadTextProtoWithLines(const std::string& path, google::protobuf::Message* message,
                              const std::string& repeated_field, std::vector<int>* lines);
// Also reports the 1-based line of each top-level field the file sets, by
// field name (a repeated field: its first element).
Status ReadTextProtoWithFieldLines(const std::string& path, google::protobuf::Message* message,
                                   std::map<std::string, int>* lines);
Status ReadBinaryProto(const std::string& path, google::protobuf::Message* message);

Status WriteTextProto(const google::protobuf::Message& message, const std::string& path);
Status WriteBinaryProto(const google::protobuf::Message& message, const std::string& path);
// Writes `contents` to `path` atomically (temporary file, fsync, rename).
Status WriteFileAtomically(const std::string& path, const std::string& contents);

// Routes libprotobuf's own log lines (e.g. "Can't parse message of type ...
// because it is missing required fields") away from stderr: every parse
// failure already comes back as a Status naming the place, and a flood of
// bad messages must not write one raw library line each. Call once in main.
void SilenceProtobufLogs();

Status ReadFileToString(const std::string& path, std::string* contents);
bool FileExists(const std::string& path);

}  // namespace pstrain
