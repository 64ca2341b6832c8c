// One field list per settings struct (DESIGN.md "Executors": "Each setting is declared once"). A struct
// names its fields once, in an X-macro list, and TESSEL_FIELDS generates from it the members, a visitor
// and equality; EncodeFields, DecodeFields and DescribeFields (below) walk the visitor. So a field added
// to the list is encoded, decoded, compared and described, and no member carries a default of its own:
// every member is value-initialised (0, "", empty), and its value comes from the validated job through
// one named function of the planner that makes the struct, or is derived there.
//
//   #define TESSEL_GPT_CONFIG_FIELDS(X) X(int32_t, layers) X(int32_t, width)
//   struct GptConfig { TESSEL_FIELDS(GptConfig, TESSEL_GPT_CONFIG_FIELDS) };
//
// A field's type is an integer, double, bool, std::string, a Choice enum (core/choices.h), a vector of
// numbers or of Choices, a Record (core/record.h: figures passed on uninterpreted), or another struct with
// TESSEL_FIELDS. The decoder checks only what bytes can get
// wrong: lengths (ByteReader) and that an enum is one of its names. Rules across fields belong to
// jobs/validate.cc, which ran on the coordinator before the struct was made.
// Thread safety: functions of values. Failure: DecodeFields fails the reader and names the field.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "core/byte_io.h"
#include "core/choices.h"
#include "core/logging.h"
#include "core/record.h"

namespace tessel {

#define TESSEL_FIELD_MEMBER_(type, name) type name{};
#define TESSEL_FIELD_VISIT_(type, name) visit(#name, self.name);
#define TESSEL_FIELD_VISIT_PAIR_(type, name) visit(a.name, b.name);

// The members of LIST and a visitor over them, without equality (for classes with a virtual base, which
// compare with FieldsEqual()).
#define TESSEL_FIELD_LIST(LIST)                                  \
  LIST(TESSEL_FIELD_MEMBER_)                                     \
  using FieldListTag = void;                                     \
  template <typename Self, typename Visit>                       \
  static void VisitFields(Self& self, Visit&& visit) {           \
    LIST(TESSEL_FIELD_VISIT_)                                    \
  }                                                              \
  template <typename Self, typename Visit>                       \
  static void VisitFieldPairs(Self& a, Self& b, Visit&& visit) { \
    LIST(TESSEL_FIELD_VISIT_PAIR_)                               \
  }

// The members of LIST, a visitor over them, and member-wise equality.
#define TESSEL_FIELDS(Struct, LIST) \
  TESSEL_FIELD_LIST(LIST)           \
  bool operator==(const Struct&) const = default;

template <typename T>
concept Fielded = requires {
  typename T::FieldListTag;
};

namespace fields_internal {

template <typename T>
struct IsVector : std::false_type {};
template <typename T>
struct IsVector<std::vector<T>> : std::true_type {
  using Element = T;
};

template <typename T>
void EncodeOne(const T& v, ByteWriter& out) {
  if constexpr (Fielded<T>) {
    T::VisitFields(v, [&out](const char*, const auto& f) { EncodeOne(f, out); });
  } else if constexpr (Choice<T>) {
    out.Put(static_cast<int32_t>(v));
  } else if constexpr (std::is_same_v<T, bool>) {
    out.Put<uint8_t>(v ? 1 : 0);
  } else if constexpr (std::is_arithmetic_v<T>) {
    out.Put(v);
  } else if constexpr (std::is_same_v<T, std::string>) {
    out.PutString(v);
  } else if constexpr (std::is_same_v<T, Record>) {
    EncodeRecord(v, out);
  } else if constexpr (IsVector<T>::value) {
    using E = typename IsVector<T>::Element;
    if constexpr (std::is_arithmetic_v<E> && !std::is_same_v<E, bool>) {
      out.PutVector(v);
    } else {
      out.Put<uint64_t>(v.size());
      for (const E& e : v) EncodeOne(e, out);
    }
  } else {
    static_assert(sizeof(T) == 0, "a field type that core/fields.h cannot encode");
  }
}

// `path` names the field in a failure ("train.lr").
template <typename T>
void DecodeOne(T& v, ByteReader& in, const std::string& path) {
  if constexpr (Fielded<T>) {
    T::VisitFields(v, [&](const char* name, auto& f) { DecodeOne(f, in, path.empty() ? name : path + "." + name); });
  } else if constexpr (Choice<T>) {
    const int32_t raw = in.Get<int32_t>(path.c_str());
    if (in.ok() && (raw < 0 || raw >= ChoiceCount<T>())) {
      in.Fail(StrCat(path, " = ", raw, " is not one of its ", ChoiceCount<T>(), " values"));
    }
    v = static_cast<T>(in.ok() ? raw : 0);
  } else if constexpr (std::is_same_v<T, bool>) {
    const uint8_t raw = in.Get<uint8_t>(path.c_str());
    if (in.ok() && raw > 1) in.Fail(StrCat(path, " = ", int{raw}, " is not a boolean"));
    v = raw == 1;
  } else if constexpr (std::is_arithmetic_v<T>) {
    v = in.Get<T>(path.c_str());
  } else if constexpr (std::is_same_v<T, std::string>) {
    v = in.GetString(path.c_str());
  } else if constexpr (std::is_same_v<T, Record>) {
    v = DecodeRecord(in);
  } else if constexpr (IsVector<T>::value) {
    using E = typename IsVector<T>::Element;
    if constexpr (std::is_arithmetic_v<E> && !std::is_same_v<E, bool>) {
      v = in.GetVector<E>(path.c_str());
    } else {
      const uint64_t n = in.Get<uint64_t>(path.c_str());
      // Every element takes at least one byte: a count beyond the bytes left is malformed.
      if (in.ok() && n > in.remaining())
        in.Fail(StrCat(path, ": ", n, " elements exceed the ", in.remaining(), " bytes left"));
      v.clear();
      for (uint64_t i = 0; in.ok() && i < n; ++i) DecodeOne(v.emplace_back(), in, StrCat(path, "[", i, "]"));
    }
  } else {
    static_assert(sizeof(T) == 0, "a field type that core/fields.h cannot decode");
  }
}

template <typename T>
void DescribeOne(const T& v, std::string& out, const std::string& path) {
  if constexpr (Fielded<T>) {
    T::VisitFields(
        v, [&](const char* name, const auto& f) { DescribeOne(f, out, path.empty() ? name : path + "." + name); });
    return;
  } else {
    if (!out.empty()) out += ' ';
    out += path;
    out += '=';
    if constexpr (Choice<T>) {
      out += NameOf(v);
    } else if constexpr (std::is_same_v<T, bool>) {
      out += v ? "true" : "false";
    } else if constexpr (std::is_arithmetic_v<T>) {
      out += StrCat(v);
    } else if constexpr (std::is_same_v<T, std::string>) {
      out += '"';
      out += v;
      out += '"';
    } else if constexpr (std::is_same_v<T, Record>) {
      out += '{' + FormatScalars(v) + '}';
    } else if constexpr (IsVector<T>::value) {
      out += '[';
      for (size_t i = 0; i < v.size(); ++i) {
        if (i > 0) out += ',';
        if constexpr (Choice<typename IsVector<T>::Element>) {
          out += NameOf(v[i]);
        } else {
          out += StrCat(v[i]);
        }
      }
      out += ']';
    }
  }
}

template <typename T>
bool EqualOne(const T& a, const T& b) {
  if constexpr (Fielded<T>) {
    bool equal = true;
    T::VisitFieldPairs(a, b, [&equal](const auto& x, const auto& y) { equal = equal && EqualOne(x, y); });
    return equal;
  } else {
    return a == b;
  }
}

}  // namespace fields_internal

// Appends every field of `v`, in list order.
template <Fielded T>
void EncodeFields(const T& v, ByteWriter& out) {
  fields_internal::EncodeOne(v, out);
}

// Reads what EncodeFields wrote into `v`. On malformed bytes the reader fails, naming the field
// (`prefix` + its path), and `v` holds zeros from there on.
template <Fielded T>
void DecodeFields(T& v, ByteReader& in, const std::string& prefix = "") {
  fields_internal::DecodeOne(v, in, prefix);
}

// "layers=4 width=256 train.lr=0.001 ... place.policies=[keep,offload]": every field, for logs and
// `describe` output.
template <Fielded T>
std::string DescribeFields(const T& v, const std::string& prefix = "") {
  std::string out;
  fields_internal::DescribeOne(v, out, prefix);
  return out;
}

// Field-wise equality (also for payload classes, which have no operator==).
template <Fielded T>
bool FieldsEqual(const T& a, const T& b) {
  return fields_internal::EqualOne(a, b);
}

// Calls visit(path, field) for every leaf field of `v` (nested structs flattened to "train.lr"), with
// the field as a mutable reference: the schema test uses it to fill every field and compare defaults.
template <Fielded T, typename Visit>
void ForEachLeafField(T& v, Visit&& visit, const std::string& prefix = "") {
  T::VisitFields(v, [&](const char* name, auto& f) {
    const std::string path = prefix.empty() ? std::string(name) : prefix + "." + name;
    if constexpr (Fielded<std::remove_cvref_t<decltype(f)>>) {
      ForEachLeafField(f, visit, path);
    } else {
      visit(path, f);
    }
  });
}

}  // namespace tessel
