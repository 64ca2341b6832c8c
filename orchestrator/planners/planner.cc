#include "orchestrator/planners/planner.h"

#include <cstdio>

namespace tessel::orchestrator {

std::string FormatBytes(int64_t b) {
  char buf[32];
  const double v = static_cast<double>(b);
  if (v >= 1 << 30) {
    std::snprintf(buf, sizeof buf, "%.2f GiB", v / (1 << 30));
  } else if (v >= 1 << 20) {
    std::snprintf(buf, sizeof buf, "%.1f MiB", v / (1 << 20));
  } else {
    std::snprintf(buf, sizeof buf, "%.1f KiB", v / 1024);
  }
  return buf;
}

}  // namespace tessel::orchestrator
