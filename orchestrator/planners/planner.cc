#include "orchestrator/planners/planner.h"

#include "orchestrator/planners/graph_planner.h"

namespace tessel::orchestrator {

Result<std::unique_ptr<Planner>> MakePlanner(const jobs::JobSpec& spec) {
  switch (spec.job.kind) {
    case jobs::JobKind::kRgnn:
      return std::unique_ptr<Planner>(std::make_unique<GraphPlanner>());
    case jobs::JobKind::kLlm:
      break;
  }
  return UsageError(StrCat(jobs::KeyOrigin(spec, "job.kind"), ": job.kind = \"", jobs::KindName(spec.job.kind),
                           "\" has no planner in this build"));
}

}  // namespace tessel::orchestrator
