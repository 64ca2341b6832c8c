#include "orchestrator/planners/registry.h"

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
  return UsageError(StrCat(jobs::KeyOrigin(spec, "job.kind"), ": job.kind = \"", NameOf(spec.job.kind),
                           "\" has no planner in this build"));
}

}  // namespace tessel::orchestrator
