#include "core/record.h"

#include <cmath>
#include <cstdio>

#include "core/json.h"

namespace tessel {
namespace {

enum class Kind : uint8_t { kInt = 1, kDouble = 2, kBool = 3, kString = 4, kDoubles = 5, kRecord = 6, kRows = 7 };

constexpr int kMaxDepth = 16;  // nested records a decoder accepts (the encoder never nests deeply)

Record DecodeRecordAt(ByteReader& in, int depth);

// `name` is the field's, for messages.
RecordValue DecodeValue(ByteReader& in, int depth, const std::string& name) {
  switch (static_cast<Kind>(in.Get<uint8_t>("record value kind"))) {
    case Kind::kInt:
      return RecordValue{in.Get<int64_t>("record int")};
    case Kind::kDouble:
      return RecordValue{in.Get<double>("record double")};
    case Kind::kBool: {
      // Only the encoder's 0 and 1: any other byte is a corrupt message, not `true`.
      const uint8_t raw = in.Get<uint8_t>("record bool");
      if (in.ok() && raw > 1) in.Fail(StrCat("record field '", name, "': bool = ", int{raw}, " is not a boolean"));
      return RecordValue{raw == 1};
    }
    case Kind::kString:
      return RecordValue{in.GetString("record string")};
    case Kind::kDoubles:
      return RecordValue{in.GetVector<double>("record array")};
    case Kind::kRecord:
      return RecordValue{DecodeRecordAt(in, depth + 1)};
    case Kind::kRows: {
      NumberRows rows;
      const uint64_t n = in.Get<uint64_t>("record rows");
      if (n > in.remaining() / 8) in.Fail("record row count exceeds the message");
      for (uint64_t i = 0; in.ok() && i < n; ++i) rows.rows.push_back(in.GetVector<double>("record row"));
      return RecordValue{std::move(rows)};
    }
  }
  in.Fail("record value of an unknown kind");
  return RecordValue{int64_t{0}};
}

Record DecodeRecordAt(ByteReader& in, int depth) {
  Record record;
  if (depth > kMaxDepth) {
    in.Fail("record nested too deeply");
    return record;
  }
  const uint64_t n = in.Get<uint64_t>("record field count");
  // Each field takes at least 9 bytes (its name's length and a kind): bounds a corrupt count.
  if (n > in.remaining() / 9) in.Fail("record field count exceeds the message");
  for (uint64_t i = 0; in.ok() && i < n; ++i) {
    RecordField f;
    f.name = in.GetString("record field name");
    f.value = DecodeValue(in, depth, f.name);
    record.push_back(std::move(f));
  }
  return record;
}

Json ValueJson(const RecordValue& v) {
  return std::visit(
      [](const auto& x) -> Json {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, Record>) {
          return RecordJson(x);
        } else if constexpr (std::is_same_v<T, NumberRows>) {
          return x.rows;
        } else {
          return x;
        }
      },
      v.data);
}

}  // namespace

void Set(Record& record, std::string_view name, RecordValue value) {
  for (RecordField& f : record) {
    if (f.name == name) {
      f.value = std::move(value);
      return;
    }
  }
  record.push_back(RecordField{std::string(name), std::move(value)});
}

void Merge(Record& into, const Record& from) {
  for (const RecordField& f : from) Set(into, f.name, f.value);
}

const RecordValue* Find(const Record& record, std::string_view name) {
  for (const RecordField& f : record) {
    if (f.name == name) return &f.value;
  }
  return nullptr;
}

std::optional<double> FindNumber(const Record& record, std::string_view name) {
  const RecordValue* v = Find(record, name);
  if (v == nullptr) return std::nullopt;
  if (const auto* i = std::get_if<int64_t>(&v->data)) return static_cast<double>(*i);
  if (const auto* d = std::get_if<double>(&v->data)) return *d;
  return std::nullopt;
}

void EncodeRecord(const Record& record, ByteWriter& out) {
  out.Put<uint64_t>(record.size());
  for (const RecordField& f : record) {
    out.PutString(f.name);
    std::visit(
        [&](const auto& x) {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, int64_t>) {
            out.Put(Kind::kInt);
            out.Put(x);
          } else if constexpr (std::is_same_v<T, double>) {
            out.Put(Kind::kDouble);
            out.Put(x);
          } else if constexpr (std::is_same_v<T, bool>) {
            out.Put(Kind::kBool);
            out.Put<uint8_t>(x ? 1 : 0);
          } else if constexpr (std::is_same_v<T, std::string>) {
            out.Put(Kind::kString);
            out.PutString(x);
          } else if constexpr (std::is_same_v<T, std::vector<double>>) {
            out.Put(Kind::kDoubles);
            out.PutVector(x);
          } else if constexpr (std::is_same_v<T, NumberRows>) {
            out.Put(Kind::kRows);
            out.Put<uint64_t>(x.rows.size());
            for (const std::vector<double>& row : x.rows) out.PutVector(row);
          } else {
            out.Put(Kind::kRecord);
            EncodeRecord(x, out);
          }
        },
        f.value.data);
  }
}

Record DecodeRecord(ByteReader& in) { return DecodeRecordAt(in, 0); }

Json RecordJson(const Record& record) {
  Json out = Json::object();
  for (const RecordField& f : record) out[f.name] = ValueJson(f.value);
  return out;
}

std::string FormatScalars(const Record& record) {
  std::string out;
  for (const RecordField& f : record) {
    char buf[64] = "";
    if (const auto* i = std::get_if<int64_t>(&f.value.data)) {
      std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(*i));
    } else if (const auto* d = std::get_if<double>(&f.value.data)) {
      // Four decimals where they read well; beyond, the shortest %g form (a learning rate of 1e308 printed
      // with %f was 309 digits, one of 3e-5 was 0.0000).
      const double a = std::fabs(*d);
      std::snprintf(buf, sizeof buf, a == 0 || (a >= 1e-3 && a < 1e6) ? "%.4f" : "%.4g", *d);
    } else if (const auto* s = std::get_if<std::string>(&f.value.data)) {
      out += (out.empty() ? "" : ", ") + f.name + " " + *s;
      continue;
    } else {
      continue;
    }
    out += (out.empty() ? "" : ", ") + f.name + " " + buf;
  }
  return out;
}

}  // namespace tessel
