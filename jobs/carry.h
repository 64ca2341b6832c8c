// How a worker's settings struct gets its values from the job: generated from the schema rows and the
// struct's field list (core/fields.h), not copied member by member. Each field takes the value of the row
// of the same name in one of the struct's sections (RgnnSettings's `lr` is train.lr, its `heads`
// model.heads), or of the row a rename names (GptConfig's `width` is model.hidden); a field the caller
// derives from several settings is listed as derived and left for it. So a setting added to the schema
// and to the worker struct under the same name is carried with no line of its own.
//
// A field that is none of these, a name found in two sections, or a row whose type cannot hold the
// field's, is a build's programming error: the process stops with a message naming the field and the key
// (tests/unit/jobs/carry_test.cc carries every struct of the build, so a suite run finds it first).
// Thread safety: functions of values.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "core/choices.h"
#include "core/fields.h"
#include "jobs/schema.h"
#include "jobs/spec.h"

namespace tessel::jobs {

struct Carry {
  std::vector<std::string_view> sections;                              // "train", "model", ...
  std::vector<std::pair<std::string_view, std::string_view>> renamed;  // field -> job key
  std::vector<std::string_view> derived;                               // fields the caller sets
};

namespace carry_internal {

[[noreturn]] inline void Fail(std::string_view field, std::string_view why) {
  std::fprintf(stderr, "tessel: internal error: carrying the job into worker field '%.*s': %.*s\n",
               static_cast<int>(field.size()), field.data(), static_cast<int>(why.size()), why.data());
  std::abort();
}

template <typename E>
bool EnumOf(const std::string& name, E* out) {
  const auto names = NamesOf(E{});
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) {
      *out = static_cast<E>(i);
      return true;
    }
  }
  return false;
}

// Sets `dst` from a schema value; false when the value's type cannot hold it.
template <typename T>
bool Assign(T& dst, const schema::Value& v) {
  if constexpr (Choice<T>) {
    const auto* s = std::get_if<std::string>(&v);
    return s != nullptr && EnumOf(*s, &dst);
  } else if constexpr (std::is_same_v<T, bool>) {
    const auto* b = std::get_if<bool>(&v);
    if (b != nullptr) dst = *b;
    return b != nullptr;
  } else if constexpr (std::is_integral_v<T>) {
    const auto* i = std::get_if<int64_t>(&v);
    if (i != nullptr) dst = static_cast<T>(*i);  // the schema's range check bounds it to T's
    return i != nullptr;
  } else if constexpr (std::is_floating_point_v<T>) {
    const auto* d = std::get_if<double>(&v);
    if (d != nullptr) dst = *d;
    return d != nullptr;
  } else if constexpr (std::is_same_v<T, std::string> || std::is_same_v<T, std::vector<std::string>>) {
    const auto* s = std::get_if<T>(&v);
    if (s != nullptr) dst = *s;
    return s != nullptr;
  } else if constexpr (std::is_same_v<T, Record>) {
    return false;  // no row holds a record (a model's own keys are one: ModelOptionsOf); the caller derives it
  } else if constexpr (fields_internal::IsVector<T>::value) {
    using E = typename fields_internal::IsVector<T>::Element;
    dst.clear();
    if constexpr (Choice<E>) {
      const auto* names = std::get_if<std::vector<std::string>>(&v);
      if (names == nullptr) return false;
      for (const std::string& name : *names) {
        E e{};
        if (!EnumOf(name, &e)) return false;
        dst.push_back(e);
      }
      return true;
    } else {
      const auto* ints = std::get_if<std::vector<int64_t>>(&v);
      if (ints == nullptr) return false;
      for (int64_t i : *ints) dst.push_back(static_cast<E>(i));
      return true;
    }
  } else {
    return false;
  }
}

// The job key of `field` under `how`, or "" when the caller derives it.
inline std::string KeyOf(std::string_view field, const Carry& how) {
  for (std::string_view d : how.derived) {
    if (d == field) return "";
  }
  for (const auto& [f, key] : how.renamed) {
    if (f == field) return std::string(key);
  }
  std::string found;
  for (std::string_view section : how.sections) {
    std::string key = std::string(section) + "." + std::string(field);
    if (schema::FindField(key) == nullptr) continue;
    if (!found.empty()) Fail(field, "rows " + found + " and " + key + " both match: rename one");
    found = std::move(key);
  }
  if (found.empty()) Fail(field, "no schema row in its sections, and it is neither renamed nor derived");
  return found;
}

}  // namespace carry_internal

// The struct with every field that is not derived set from `spec`.
template <Fielded S>
S CarryFrom(const JobSpec& spec, const Carry& how) {
  S out{};
  S::VisitFields(out, [&](const char* name, auto& member) {
    const std::string key = carry_internal::KeyOf(name, how);
    if (key.empty()) return;
    const schema::Field* row = schema::FindField(key);
    if (row == nullptr) carry_internal::Fail(name, "renamed to " + key + ", which is no schema row");
    if (!carry_internal::Assign(member, row->get(spec))) {
      carry_internal::Fail(name, "the row " + key + " is of another type");
    }
  });
  return out;
}

}  // namespace tessel::jobs
