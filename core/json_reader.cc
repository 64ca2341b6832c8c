#include "core/json_reader.h"

#include <cstdlib>

#include "core/logging.h"

namespace tessel {

const JsonValue* JsonValue::Find(std::string_view key) const {
  for (const auto& [k, v] : fields_) {
    if (k == key) return &v;
  }
  return nullptr;
}

class JsonParser {
 public:
  JsonParser(std::string_view text, std::string_view where) : s_(text), where_(where) {}

  Result<JsonValue> Document() {
    JsonValue v;
    if (!Value(&v, 0)) return error_;
    Skip();
    if (pos_ != s_.size()) return Fail("trailing characters after the value");
    return v;
  }

 private:
  Status Fail(std::string_view what) {
    error_ = BadDataError(StrCat(where_, ": invalid JSON at byte ", pos_, ": ", what));
    return error_;
  }
  void Skip() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\r' || s_[pos_] == '\t')) ++pos_;
  }
  bool Literal(std::string_view word) {
    if (s_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  bool Value(JsonValue* v, int depth) {
    if (depth > 64) return (void)Fail("nested too deeply"), false;
    Skip();
    if (pos_ >= s_.size()) return (void)Fail("unexpected end"), false;
    const char c = s_[pos_];
    if (c == '{') return Object(v, depth);
    if (c == '[') return Array(v, depth);
    if (c == '"') {
      v->kind_ = JsonValue::Kind::kString;
      return String(&v->string_);
    }
    if (Literal("true")) return v->kind_ = JsonValue::Kind::kBool, v->bool_ = true, true;
    if (Literal("false")) return v->kind_ = JsonValue::Kind::kBool, v->bool_ = false, true;
    if (Literal("null")) return v->kind_ = JsonValue::Kind::kNull, true;
    if (c == '-' || (c >= '0' && c <= '9')) return Number(v);
    return (void)Fail(StrCat("unexpected character '", std::string(1, c), "'")), false;
  }

  bool Number(JsonValue* v) {
    const size_t start = pos_;
    while (pos_ < s_.size() && std::string_view("+-0123456789.eE").find(s_[pos_]) != std::string_view::npos) ++pos_;
    const std::string text(s_.substr(start, pos_ - start));
    char* end = nullptr;
    v->number_ = std::strtod(text.c_str(), &end);
    if (end != text.c_str() + text.size() || text.empty()) return (void)Fail("bad number"), false;
    v->kind_ = JsonValue::Kind::kNumber;
    return true;
  }

  bool String(std::string* out) {
    ++pos_;  // the opening quote
    while (pos_ < s_.size()) {
      const char c = s_[pos_++];
      if (c == '"') return true;
      if (static_cast<unsigned char>(c) < 0x20) return (void)Fail("control character in a string"), false;
      if (c != '\\') {
        out->push_back(c);
        continue;
      }
      if (pos_ >= s_.size()) break;
      const char e = s_[pos_++];
      switch (e) {
        case '"': case '\\': case '/': out->push_back(e); break;
        case 'b': out->push_back('\b'); break;
        case 'f': out->push_back('\f'); break;
        case 'n': out->push_back('\n'); break;
        case 'r': out->push_back('\r'); break;
        case 't': out->push_back('\t'); break;
        case 'u': {
          if (pos_ + 4 > s_.size()) return (void)Fail("short \\u escape"), false;
          const std::string hex(s_.substr(pos_, 4));
          char* end = nullptr;
          const unsigned long cp = std::strtoul(hex.c_str(), &end, 16);
          if (end != hex.c_str() + 4) return (void)Fail("bad \\u escape"), false;
          pos_ += 4;
          // UTF-8 of the code point (surrogate pairs are kept as two code points: Tessel never writes them).
          if (cp < 0x80) {
            out->push_back(static_cast<char>(cp));
          } else if (cp < 0x800) {
            out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
            out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
          } else {
            out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
            out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
            out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
          }
          break;
        }
        default: return (void)Fail("bad escape"), false;
      }
    }
    return (void)Fail("unterminated string"), false;
  }

  bool Array(JsonValue* v, int depth) {
    v->kind_ = JsonValue::Kind::kArray;
    ++pos_;
    Skip();
    if (pos_ < s_.size() && s_[pos_] == ']') return ++pos_, true;
    while (true) {
      v->items_.emplace_back();
      if (!Value(&v->items_.back(), depth + 1)) return false;
      Skip();
      if (pos_ < s_.size() && s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < s_.size() && s_[pos_] == ']') return ++pos_, true;
      return (void)Fail("expected ',' or ']'"), false;
    }
  }

  bool Object(JsonValue* v, int depth) {
    v->kind_ = JsonValue::Kind::kObject;
    ++pos_;
    Skip();
    if (pos_ < s_.size() && s_[pos_] == '}') return ++pos_, true;
    while (true) {
      Skip();
      if (pos_ >= s_.size() || s_[pos_] != '"') return (void)Fail("expected a key"), false;
      std::string key;
      if (!String(&key)) return false;
      Skip();
      if (pos_ >= s_.size() || s_[pos_] != ':') return (void)Fail("expected ':'"), false;
      ++pos_;
      v->fields_.emplace_back(std::move(key), JsonValue());
      if (!Value(&v->fields_.back().second, depth + 1)) return false;
      Skip();
      if (pos_ < s_.size() && s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < s_.size() && s_[pos_] == '}') return ++pos_, true;
      return (void)Fail("expected ',' or '}'"), false;
    }
  }

  std::string_view s_;
  std::string where_;
  size_t pos_ = 0;
  Status error_;
};

Result<JsonValue> ParseJson(std::string_view text, std::string_view where) { return JsonParser(text, where).Document(); }

}  // namespace tessel
