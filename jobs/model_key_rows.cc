// The rows of the keys that models declare for themselves (core/model_keys.h), as rows of the field table
// (jobs/schema.h), and the record of them that a job's workers receive.
#include <limits>
#include <type_traits>

#include "core/model_keys.h"
#include "jobs/schema.h"
#include "jobs/spec.h"

namespace tessel::jobs {

namespace schema {
namespace {

Value ValueOf(const ModelKeyValue& v) {
  return std::visit(
      [](const auto& x) -> Value {
        if constexpr (std::is_same_v<std::decay_t<decltype(x)>, std::string_view>) {
          return std::string(x);
        } else {
          return x;
        }
      },
      v);
}

Field RowOf(const ModelKey& key) {
  Field f;
  f.key = key.key;
  f.effect = Effect::kTrajectory;  // a model's key changes what it computes
  f.doc = key.doc;
  f.constraint.min = key.min;
  f.constraint.max = key.max;
  f.constraint.choices.assign(key.choices.begin(), key.choices.end());
  switch (key.default_value.index()) {
    case 0:
      f.type = ValueType::kInteger;
      // Models hold their integers in int32_t, as the built-in keys' members do.
      f.type_min = std::numeric_limits<int32_t>::min();
      f.type_max = std::numeric_limits<int32_t>::max();
      break;
    case 1:
      f.type = ValueType::kFloat;
      break;
    case 2:
      f.type = ValueType::kBoolean;
      break;
    default:
      f.type = ValueType::kString;
      break;
  }
  // The spec holds a key only while it differs from its default, so two jobs that train the same model
  // compare equal however they spelled it (job.toml writes every key).
  f.set = [k = &key](JobSpec& s, const Value& v) {
    if (v == ValueOf(k->default_value)) {
      if (const auto it = s.model.options.find(k->key); it != s.model.options.end()) s.model.options.erase(it);
      return;
    }
    ModelOption& option = s.model.options[std::string(k->key)];
    std::visit(
        [&option](const auto& x) {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, int64_t> || std::is_same_v<T, double> || std::is_same_v<T, bool> ||
                        std::is_same_v<T, std::string>) {
            option = x;
          }
        },
        v);
  };
  f.get = [k = &key](const JobSpec& s) -> Value {
    const auto it = s.model.options.find(k->key);
    if (it == s.model.options.end()) return ValueOf(k->default_value);
    return std::visit([](const auto& x) -> Value { return x; }, it->second);
  };
  return f;
}

}  // namespace

std::vector<Field> WithModelKeyRows(std::vector<Field> fields) {
  // After the [model] section's own rows, where a reader of the reference looks for them.
  size_t at = fields.size();
  for (size_t i = 0; i < fields.size(); ++i) {
    if (fields[i].key.starts_with("model.")) at = i + 1;
  }
  std::vector<Field> rows;
  for (const RegisteredModelKey& r : SealModelKeys()) rows.push_back(RowOf(*r.key));
  fields.insert(fields.begin() + static_cast<std::ptrdiff_t>(at), std::make_move_iterator(rows.begin()),
                std::make_move_iterator(rows.end()));
  return fields;
}

}  // namespace schema

Record ModelOptionsOf(const JobSpec& spec) {
  Record out;
  for (const RegisteredModelKey& r : SealModelKeys()) {
    if (r.model != spec.model.name) continue;
    std::visit(
        [&](const auto& v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, int64_t> || std::is_same_v<T, double> || std::is_same_v<T, bool> ||
                        std::is_same_v<T, std::string>) {
            Set(out, r.key->key, RecordValue{v});
          }
        },
        schema::FindField(r.key->key)->get(spec));
  }
  return out;
}

}  // namespace tessel::jobs
