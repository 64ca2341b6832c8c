#include "orchestrator/planners/planner.h"

#include <cstdio>

#include "orchestrator/planners/graph_planner.h"
#include "orchestrator/planners/stage_planner.h"

namespace tessel::orchestrator {

Result<std::unique_ptr<Planner>> MakePlanner(const jobs::JobSpec& spec) {
  switch (spec.job.kind) {
    case jobs::JobKind::kRgnn:
      return std::unique_ptr<Planner>(std::make_unique<GraphPlanner>());
    case jobs::JobKind::kLlm:
      return std::unique_ptr<Planner>(std::make_unique<StagePlanner>());
  }
  return UsageError(StrCat(jobs::KeyOrigin(spec, "job.kind"), ": job.kind = \"", jobs::KindName(spec.job.kind),
                           "\" has no planner in this build"));
}

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
