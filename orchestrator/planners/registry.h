// The planner registry: the one place that maps a job to its planner (DESIGN.md "Executors"). The
// coordinator and `tessel plan` call MakePlanner and see only the Planner interface (planner.h).
// Ownership: the caller owns the planner. Thread safety: reentrant. Failure: kUsage for a job this build
// has no planner for.
#pragma once

#include <memory>

#include "core/status.h"
#include "jobs/spec.h"
#include "orchestrator/planners/planner.h"

namespace tessel::orchestrator {

// The planner for the job's kind (and, later, mode).
Result<std::unique_ptr<Planner>> MakePlanner(const jobs::JobSpec& spec);

}  // namespace tessel::orchestrator
