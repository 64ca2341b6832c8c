// Minimal leveled logging to stderr. A Logger is a value passed explicitly (no global state):
// it carries the rank prefix and the minimum level.
// Thread safety: Log() may be called from any thread; lines are written whole.
#pragma once

#include <sstream>
#include <string>
#include <string_view>

#include "core/choices.h"

namespace tessel {

class Logger {
 public:
  Logger() = default;
  Logger(std::string prefix, LogLevel min_level) : prefix_(std::move(prefix)), min_level_(min_level) {}

  void Log(LogLevel level, std::string_view message) const;
  bool Enabled(LogLevel level) const { return level >= min_level_; }
  const std::string& prefix() const { return prefix_; }

  void Debug(std::string_view m) const { Log(LogLevel::kDebug, m); }
  void Info(std::string_view m) const { Log(LogLevel::kInfo, m); }
  void Warn(std::string_view m) const { Log(LogLevel::kWarn, m); }
  void Error(std::string_view m) const { Log(LogLevel::kError, m); }

 private:
  std::string prefix_;
  LogLevel min_level_ = LogLevel::kInfo;
};

// Concatenates anything streamable: StrCat("rank ", 3, ": ", msg).
template <typename... Args>
std::string StrCat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

}  // namespace tessel
