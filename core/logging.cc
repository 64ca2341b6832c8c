#include "core/logging.h"

#include <chrono>
#include <cstdio>
#include <ctime>

namespace tessel {

void Logger::Log(LogLevel level, std::string_view message) const {
  if (!Enabled(level)) return;
  static constexpr const char* kNames[] = {"debug", "info", "warn", "error"};
  auto now = std::chrono::system_clock::now();
  std::time_t t = std::chrono::system_clock::to_time_t(now);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%H:%M:%S", &tm);
  std::string line = std::string(stamp) + " " + kNames[static_cast<int>(level)] + " " + prefix_ +
                     (prefix_.empty() ? "" : ": ") + std::string(message) + "\n";
  std::fwrite(line.data(), 1, line.size(), stderr);  // one write per line keeps lines whole
  std::fflush(stderr);
}

}  // namespace tessel
