// RUN_DIR and its files: summary.json (DESIGN.md "Run output": keys only ever grow) and job.toml.
// Files are written to a temporary name and renamed, so readers never see half a file.
#pragma once

#include <string>

#include "core/status.h"
#include "jobs/spec.h"
#include "orchestrator/job_plan.h"
#include "storage/graph.h"
#include "workers/protocol.h"

namespace tessel::orchestrator {

// spec.job.output_dir, or runs/<name>-<UTC yyyymmdd-hhmmss> when it is empty. Creates it.
Result<std::string> MakeRunDir(const jobs::JobSpec& spec);

Status WriteFileAtomically(const std::string& path, const std::string& contents);

Status WriteSummary(const std::string& run_dir, const jobs::JobSpec& spec, const storage::HeteroGraph& graph,
                    const JobPlan& plan, const workers::ResultMsg& result, double wall_seconds);

}  // namespace tessel::orchestrator
