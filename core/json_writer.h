// JsonWriter: builds compact or indented JSON text. Used for summary.json, partition.json, targets
// files and benchmark rows. Keys and strings are escaped; non-finite numbers become null.
// Thread safety: a value; one thread at a time.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tessel {

class JsonWriter {
 public:
  explicit JsonWriter(bool pretty = true) : pretty_(pretty) {}

  JsonWriter& BeginObject();
  JsonWriter& EndObject();
  JsonWriter& BeginArray();
  JsonWriter& EndArray();
  JsonWriter& Key(std::string_view key);
  JsonWriter& String(std::string_view value);
  JsonWriter& Number(double value);
  JsonWriter& Int(int64_t value);
  JsonWriter& Bool(bool value);
  JsonWriter& Null();

  // Shorthands for "key": value inside an object.
  JsonWriter& Field(std::string_view key, std::string_view value) { return Key(key).String(value); }
  JsonWriter& Field(std::string_view key, const char* value) { return Key(key).String(value); }
  JsonWriter& Field(std::string_view key, double value) { return Key(key).Number(value); }
  JsonWriter& Field(std::string_view key, int64_t value) { return Key(key).Int(value); }
  JsonWriter& Field(std::string_view key, int32_t value) { return Key(key).Int(value); }
  JsonWriter& Field(std::string_view key, bool value) { return Key(key).Bool(value); }
  JsonWriter& Field(std::string_view key, const std::vector<double>& values);

  const std::string& str() const { return out_; }

 private:
  void BeforeValue();
  void Newline();

  std::string out_;
  std::vector<bool> first_;  // per open container: nothing written yet
  bool pretty_;
  bool after_key_ = false;
};

std::string JsonEscape(std::string_view s);

}  // namespace tessel
