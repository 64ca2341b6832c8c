// The rows file of a benchmark binary of bench/ (bench/README.md, "JSON rows").
#pragma once

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

#include "core/json.h"

namespace tessel::bench {

// Writes `rows` to `path` as indented JSON (its folder made) and prints where; false, with a message that
// names `tool`, when it cannot.
inline bool WriteJsonRows(const char* tool, const std::string& path, const Json& rows) {
  std::error_code ec;
  const std::filesystem::path json(path);
  if (json.has_parent_path()) std::filesystem::create_directories(json.parent_path(), ec);
  std::ofstream file(path);
  file << FormatJson(rows, JsonLayout::kIndented) << "\n";
  if (!file) {
    std::fprintf(stderr, "%s: cannot write %s\n", tool, path.c_str());
    return false;
  }
  std::printf("\nJSON: %s\n", path.c_str());
  return true;
}

}  // namespace tessel::bench
