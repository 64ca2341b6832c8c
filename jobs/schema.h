// Internal to jobs/ (and to the templates of jobs/carry.h, which read the rows): the field table, the one place where a
// job-file key is named, typed, constrained and documented (STYLE.md "Typed configuration, declared once"). Defaults
// are not repeated here: they are read from a default-constructed JobSpec. Thread safety: the table is built once (a
// function-local static) and read-only afterwards.
#pragma once

#include <toml++/toml.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/status.h"
#include "jobs/spec.h"

namespace tessel::jobs::schema {

enum class ValueType {
  kInteger,
  kFloat,  // a TOML float or integer
  kBoolean,
  kString,
  kStringArray,
  kIntegerArray,
  kBytes,  // a TOML integer, or a string with a unit: "512MiB", "64GiB", "1.5TB"
};

// A field's value, independent of the C++ member it lands in (enums travel as their name).
using Value = std::variant<int64_t, double, bool, std::string, std::vector<std::string>, std::vector<int64_t>>;

// What a value must satisfy beyond its type. Bounds apply to numbers; choices and non_empty to strings
// (choices also to each element of an array of strings).
struct Constraint {
  bool required = false;
  bool non_empty = false;
  bool bytes = false;  // an int64 size that also takes unit strings
  std::optional<double> min, max;
  bool min_exclusive = false, max_exclusive = false;
  std::vector<std::string_view> choices;

  Constraint AtMost(double v) const;
  Constraint Below(double v) const;
};
Constraint Any();
Constraint Required();
Constraint NonEmpty();
Constraint AtLeast(double v);
Constraint Above(double v);
Constraint Bytes();  // >= 0, with unit strings
Constraint OneOf(std::vector<std::string_view> choices);

// Whether a key changes what training computes step by step (a checkpoint records every such key, and
// `--resume` refuses a checkpoint whose values differ: jobs::TrajectorySettings). Declared once per row:
// TESSEL_JOB_FIELD is kTrajectory, TESSEL_INPUT_FIELD kInputFile, TESSEL_RUN_FIELD kRunOnly.
enum class Effect {
  kTrajectory,  // model, data, batch, seed, precision, optimizer: a resume with another value trains another model
  kInputFile,   // as kTrajectory, and the value names input files, whose size and modification time count too
  kRunOnly,     // how long, where, how observed or on what resources the same trajectory runs
};

struct Field {
  std::string_view key;  // "train.epochs": also the member path inside JobSpec
  Effect effect = Effect::kTrajectory;
  ValueType type;
  int64_t type_min = 0, type_max = 0;  // the C++ member's range, for integers
  Constraint constraint;
  std::string_view doc;
  std::function<void(JobSpec&, const Value&)> set;  // the value must already be checked by Convert()
  std::function<Value(const JobSpec&)> get;
};

// Every key, in documentation order (sections in file order; a subsection after its parent's keys; the keys
// models declare for themselves, core/model_keys.h, after the [model] section's own). The first call seals
// the registry of model keys.
const std::vector<Field>& Fields();
// `fields` with the rows of the registered model keys inserted (jobs/model_key_rows.cc).
std::vector<Field> WithModelKeyRows(std::vector<Field> fields);
const Field* FindField(std::string_view key);
// True for "job", "data", "data.synthetic", ...: a prefix that names a table of keys.
bool IsSection(std::string_view key);
// Key paths and section names, for "did you mean".
std::vector<std::string> SectionNames();

// Checks a TOML node against the field's type (and, for enum-like fields, its choices) and converts it.
// The error message has no location; the caller prefixes "ORIGIN: key: ".
Result<Value> Convert(const Field& field, const toml::node& node);
// Checks bounds, choices and non-emptiness of a converted value; "" when it passes, else the problem
// ("must be >= 1, got 0").
std::string CheckConstraint(const Field& field, const Value& value);

std::string_view TypeName(ValueType type);
std::string_view NodeTypeName(const toml::node& node);  // "string", "integer", "float", "table", ...
std::string FormatValue(const Value& value);            // as TOML
std::string DescribeAllowed(const Field& field);
std::string QuoteToml(std::string_view s);  // a TOML basic string, escaped
std::string FormatNumber(double v);         // shortest round-trip text

// Problems found in one pass, reported together: one "ORIGIN: message" line each, as one kUsage status.
class ErrorList {
 public:
  void Add(std::string_view origin, std::string_view message);
  bool empty() const { return lines_.empty(); }
  Status ToStatus() const;

 private:
  std::vector<std::string> lines_;
};

}  // namespace tessel::jobs::schema
