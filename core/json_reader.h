// A small JSON reader for the files Tessel itself writes and reads back (the checkpoint manifest):
// objects, arrays, strings (with \" \\ \/ \b \f \n \r \t \uXXXX escapes), numbers, true, false, null.
//
//   TESSEL_ASSIGN_OR_RETURN(JsonValue doc, ParseJson(text, "manifest.json"));
//   const JsonValue* step = doc.Find("step");  // null if absent
//   if (step == nullptr || !step->is_number()) return ...;
//
// Ownership: values own their children. Thread safety: values. Failure: kBadData naming `where` and the
// byte offset; nesting deeper than 64 levels is refused.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace tessel {

class JsonValue {
 public:
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject };

  Kind kind() const { return kind_; }
  bool is_number() const { return kind_ == Kind::kNumber; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_array() const { return kind_ == Kind::kArray; }
  bool is_object() const { return kind_ == Kind::kObject; }
  bool boolean() const { return bool_; }
  double number() const { return number_; }
  const std::string& string() const { return string_; }
  const std::vector<JsonValue>& items() const { return items_; }
  const std::vector<std::pair<std::string, JsonValue>>& fields() const { return fields_; }
  // The member `key` of an object (the first, if repeated), or null.
  const JsonValue* Find(std::string_view key) const;

 private:
  friend class JsonParser;
  Kind kind_ = Kind::kNull;
  bool bool_ = false;
  double number_ = 0;
  std::string string_;
  std::vector<JsonValue> items_;
  std::vector<std::pair<std::string, JsonValue>> fields_;
};

Result<JsonValue> ParseJson(std::string_view text, std::string_view where);

}  // namespace tessel
