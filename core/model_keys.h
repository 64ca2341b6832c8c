// The job keys a model declares for itself (DESIGN.md "Each setting is declared once": "a model registers
// the rows of its own keys"). A model names each of its keys once, in its own file, as a ModelKey: the
// key, its default (whose type is the key's), its bounds or choices and its doc line. Registering the
// model registers its keys (workers/rgnn/model_registry.h), and the job schema (jobs/schema.cc) reads every
// registered key as a row of its table, so parsing, `--set`, "did you mean", the resume check, job.toml
// and the reference tables take them as they take the built-in keys. A key of one model set to other than
// its default in a job that trains another model is refused (jobs/validate.cc).
//
// On the way to the workers the keys travel as a Record (the settings' `options`: core/record.h), one
// field per key of the model the job trains, named by the key; the model reads its value with
// ModelKey::Of, which gives the default where the record has no such field.
//
//   constexpr ModelKey kBias = ModelKey::Boolean("model.bias", false, "HGT: ...");
//   std::vector<const ModelKey*> Keys() const override { return {&kBias}; }
//   const bool bias = kBias.Of<bool>(settings.options);
//
// Lifetime: ModelKeys must live for the process (constexpr or static). Thread safety: registration before
// main (static initialisers) or before the schema is first read, which seals the registry: a key
// registered later would not be parsed, so it stops the process as a programming error, as does a key
// registered twice. Lookups after sealing from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/record.h"

namespace tessel {

// A key's value: its default's alternative is its type.
using ModelKeyValue = std::variant<int64_t, double, bool, std::string_view>;

struct ModelKey {
  std::string_view key;  // "model.bias": a key of the [model] section
  ModelKeyValue default_value;
  std::optional<double> min, max;             // numbers: inclusive bounds
  std::span<const std::string_view> choices;  // strings: the values it takes (empty: any)
  std::string_view doc;                       // one line, as the reference table prints it

  static constexpr ModelKey Boolean(std::string_view key, bool default_value, std::string_view doc) {
    return {.key = key, .default_value = default_value, .min = {}, .max = {}, .choices = {}, .doc = doc};
  }
  // An integer key holds an int32 (as the built-in keys' members do); min and max are inclusive.
  static constexpr ModelKey Integer(std::string_view key, int64_t default_value, std::optional<double> min,
                                    std::optional<double> max, std::string_view doc) {
    return {.key = key, .default_value = default_value, .min = min, .max = max, .choices = {}, .doc = doc};
  }
  static constexpr ModelKey Float(std::string_view key, double default_value, std::optional<double> min,
                                  std::optional<double> max, std::string_view doc) {
    return {.key = key, .default_value = default_value, .min = min, .max = max, .choices = {}, .doc = doc};
  }
  // `choices` must outlive the key (a constexpr array); empty: any string.
  static constexpr ModelKey String(std::string_view key, std::string_view default_value,
                                   std::span<const std::string_view> choices, std::string_view doc) {
    return {.key = key, .default_value = default_value, .min = {}, .max = {}, .choices = choices, .doc = doc};
  }

  // The value in `options` (the settings' record of the job's model keys), or the default. T is the key's
  // type (int64_t or a narrower integer, double, bool, std::string).
  template <typename T>
  T Of(const Record& options) const;
};

// A registered key and the model it belongs to.
struct RegisteredModelKey {
  std::string_view model;
  const ModelKey* key;
};

// Registers `model`'s keys. A key that is taken (by this model or another), one outside [model], or a
// registration after SealModelKeys() stops the process naming the key.
void RegisterModelKeys(std::string_view model, std::span<const ModelKey* const> keys);
// Every registered key, in registration order; later registrations are refused from here on.
std::span<const RegisteredModelKey> SealModelKeys();

template <typename T>
T ModelKey::Of(const Record& options) const {
  const RecordValue* v = Find(options, key);
  if constexpr (std::is_same_v<T, bool>) {
    if (v != nullptr && std::holds_alternative<bool>(v->data)) return std::get<bool>(v->data);
    return std::get<bool>(default_value);
  } else if constexpr (std::is_integral_v<T>) {
    if (v != nullptr && std::holds_alternative<int64_t>(v->data)) return static_cast<T>(std::get<int64_t>(v->data));
    return static_cast<T>(std::get<int64_t>(default_value));
  } else if constexpr (std::is_floating_point_v<T>) {
    if (v != nullptr && std::holds_alternative<double>(v->data)) return std::get<double>(v->data);
    return std::get<double>(default_value);
  } else {
    static_assert(std::is_same_v<T, std::string>, "a model key is an integer, double, bool or string");
    if (v != nullptr && std::holds_alternative<std::string>(v->data)) return std::get<std::string>(v->data);
    return std::string(std::get<std::string_view>(default_value));
  }
}

}  // namespace tessel
