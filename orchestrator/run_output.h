// RUN_DIR and its files: summary.json (DESIGN.md "Run output": keys only ever grow) and job.toml.
// Files are written to a temporary name and renamed, so readers never see half a file.
#pragma once

#include <string>

#include "core/record.h"
#include "core/safe_file.h"  // WriteFileAtomically, for the run directory's files
#include "core/status.h"
#include "jobs/spec.h"

namespace tessel::orchestrator {

// spec.job.output_dir, or runs/<name>-<UTC yyyymmdd-hhmmss> when it is empty. Creates nothing.
std::string RunDirPath(const jobs::JobSpec& spec);
// Creates `dir` and its parents (kStorage naming it when it cannot).
Status CreateRunDir(const std::string& dir);
// RunDirPath, created.
Result<std::string> MakeRunDir(const jobs::JobSpec& spec);

// For `tessel run --resume`: spec.job.output_dir when set; else, when checkpoint.dir is set, a new
// run directory's path; else the newest runs/<name>-<stamp> that holds checkpoints (kUsage when none
// does). Creates nothing: a refused resume leaves nothing behind.
Result<std::string> ResumeRunDir(const jobs::JobSpec& spec);

// Writes RUN_DIR/summary.json: the fields of `summary` in order (the coordinator assembles the common
// keys, the plan's facts and the executor's result).
Status WriteSummary(const std::string& run_dir, const Record& summary);

}  // namespace tessel::orchestrator
