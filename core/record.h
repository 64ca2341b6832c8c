// Record: an ordered list of named values (numbers, strings, number arrays, nested records). Executors
// report their results and per-step figures as Records, and planners their facts; the coordinator
// merges them into summary.json without knowing what they mean. Records cross ranks through
// EncodeRecord/DecodeRecord and become JSON through RecordJson.
// Thread safety: values. Failure: DecodeRecord fails the ByteReader on malformed bytes.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/byte_io.h"

namespace tessel {

struct RecordField;
using Record = std::vector<RecordField>;
// Rows of numbers, written to JSON as an array of arrays ([[step, loss], ...]).
struct NumberRows {
  std::vector<std::vector<double>> rows;
  bool operator==(const NumberRows&) const = default;
};

struct RecordValue {
  std::variant<int64_t, double, bool, std::string, std::vector<double>, Record, NumberRows> data;
  bool operator==(const RecordValue&) const = default;
};

struct RecordField {
  std::string name;
  RecordValue value;
  bool operator==(const RecordField&) const = default;
};

// Appends or replaces `name` (a later Set of the same name wins, in the original position).
void Set(Record& record, std::string_view name, RecordValue value);
inline void Set(Record& record, std::string_view name, int64_t v) { Set(record, name, RecordValue{v}); }
inline void Set(Record& record, std::string_view name, int32_t v) { Set(record, name, RecordValue{int64_t{v}}); }
inline void Set(Record& record, std::string_view name, double v) { Set(record, name, RecordValue{v}); }
inline void Set(Record& record, std::string_view name, bool v) { Set(record, name, RecordValue{v}); }
inline void Set(Record& record, std::string_view name, std::string v) { Set(record, name, RecordValue{std::move(v)}); }
inline void Set(Record& record, std::string_view name, const char* v) {
  Set(record, name, RecordValue{std::string(v)});
}
inline void Set(Record& record, std::string_view name, std::vector<double> v) {
  Set(record, name, RecordValue{std::move(v)});
}
inline void Set(Record& record, std::string_view name, Record v) { Set(record, name, RecordValue{std::move(v)}); }
inline void Set(Record& record, std::string_view name, NumberRows v) { Set(record, name, RecordValue{std::move(v)}); }

// Appends every field of `from` (replacing fields of the same name).
void Merge(Record& into, const Record& from);

const RecordValue* Find(const Record& record, std::string_view name);
// A number field as a double (int64 or double), or nullopt when absent or not a number.
std::optional<double> FindNumber(const Record& record, std::string_view name);

void EncodeRecord(const Record& record, ByteWriter& out);
Record DecodeRecord(ByteReader& in);

// The record as a JSON object (core/json.h's Json), fields in record order: int64 as integers, doubles
// as doubles (NaN and infinities are written as null), number arrays as arrays, NumberRows as arrays of
// arrays, nested records as objects.
nlohmann::ordered_json RecordJson(const Record& record);

// "name value, name value" for log lines: numbers with 4 decimals between 0.001 and 1e6, else in the short
// %g form (1e+308, 3e-05); arrays and records skipped.
std::string FormatScalars(const Record& record);

}  // namespace tessel
