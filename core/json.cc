#include "core/json.h"

#include <algorithm>

#include "core/logging.h"

namespace tessel {

std::string FormatJson(const Json& value, JsonLayout layout) {
  return value.dump(layout == JsonLayout::kIndented ? 2 : -1, ' ', /*ensure_ascii=*/false,
                    Json::error_handler_t::replace);
}

Result<Json> ParseJson(std::string_view text, std::string_view where) {
  try {
    return Json::parse(text.begin(), text.end());
  } catch (const Json::parse_error& e) {
    // e.byte counts from 1 and is one past the end for "unexpected end of input"; nlohmann's own text
    // starts "[json.exception.parse_error.101] parse error at line 1, column 5: ", which is replaced.
    const size_t offset = std::min(e.byte > 0 ? e.byte - 1 : 0, text.size());
    const std::string_view before = text.substr(0, offset);
    const size_t line = 1 + static_cast<size_t>(std::count(before.begin(), before.end(), '\n'));
    const size_t last_newline = before.rfind('\n');
    const size_t column = last_newline == std::string_view::npos ? offset + 1 : offset - last_newline;
    std::string what = e.what();
    if (const size_t colon = what.find(": ", what.find("parse error")); colon != std::string::npos) {
      what.erase(0, colon + 2);
    }
    return BadDataError(
        StrCat(where, ": invalid JSON at byte ", offset, " (line ", line, ", column ", column, "): ", what));
  } catch (const Json::exception& e) {
    // Thrown after the lexer, without a position: a number too large for a double ("number overflow
    // parsing '1e999'", which names the token).
    std::string what = e.what();
    if (const size_t bracket = what.find("] "); bracket != std::string::npos) what.erase(0, bracket + 2);
    return BadDataError(StrCat(where, ": invalid JSON: ", what));
  }
}

}  // namespace tessel
