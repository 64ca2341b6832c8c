// JSON for the files Tessel writes and reads back: summary.json, the checkpoint manifest, partition.json,
// the Prometheus targets file, the status file and benchmark rows. Values are nlohmann::ordered_json
// (objects keep their keys in insertion order); this header fixes how every file is written and how a
// parse error reads.
//
//   Json doc = Json::object();
//   doc["format"] = "tessel-checkpoint";
//   doc["step"] = step;                                   // an integer stays an integer
//   TESSEL_RETURN_IF_ERROR(WriteFileAtomically(path, FormatJson(doc, JsonLayout::kIndented) + "\n"));
//   TESSEL_ASSIGN_OR_RETURN(Json back, ParseJson(text, path));
//
// Ownership: values own their children. Thread safety: values; one thread per value while it changes.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/status.h"

namespace tessel {

using Json = nlohmann::ordered_json;

enum class JsonLayout {
  kCompact,   // one line, no spaces: {"a":1,"b":[2,3]}
  kIndented,  // two spaces per level, one member or element per line, "key": value
};

// The text of `value`. A double is written as the shortest text that reads back to the same bits
// (0.1, not 0.10000000000000001), an integer as an integer, a NaN or infinity as null. Strings are
// written as UTF-8; bytes that are not valid UTF-8 become U+FFFD. Never throws.
std::string FormatJson(const Json& value, JsonLayout layout);

// Parses one JSON document (RFC 8259: no comments, nothing after the value). Failure: kBadData
// "WHERE: invalid JSON at byte N (line L, column C): what", N counted from 0, L and C from 1; a number
// too large for a double has no position ("WHERE: invalid JSON: number overflow parsing '1e999'").
// Nesting depth is not limited: the parser and the value's destructor do not recurse.
Result<Json> ParseJson(std::string_view text, std::string_view where);

}  // namespace tessel
