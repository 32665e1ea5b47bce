// JsonLine: builds one JSON object on one line, for the --json output of the
// programs and for metrics.jsonl. Keys keep insertion order; non-finite
// numbers are written as null (JSON has no NaN).
#pragma once

#include <cstdint>
#include <string>

namespace pstrain {

class JsonLine {
 public:
  JsonLine& Add(const std::string& key, const std::string& value);
  JsonLine& Add(const std::string& key, const char* value) { return Add(key, std::string(value)); }
  JsonLine& Add(const std::string& key, double value);
  JsonLine& Add(const std::string& key, int64_t value);
  JsonLine& Add(const std::string& key, int value) { return Add(key, static_cast<int64_t>(value)); }
  JsonLine& Add(const std::string& key, bool value);
  // Adds `raw` verbatim (an already-formatted JSON value such as an object).
  JsonLine& AddRaw(const std::string& key, const std::string& raw);
  std::string str() const { return "{" + body_ + "}"; }

  static std::string Quote(const std::string& s);

 private:
  void Key(const std::string& key);
  std::string body_;
};

}  // namespace pstrain
