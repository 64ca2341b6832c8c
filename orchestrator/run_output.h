// RUN_DIR and its files: summary.json (DESIGN.md "Run output": keys only ever grow) and job.toml, and the
// claim that keeps two runs out of one directory. Files are written to a temporary name and renamed, so
// readers never see half a file (core/safe_file.h).
//
// Thread safety: free functions and one owner per RunDirClaim. Failure: kUsage (exit 2) when the directory
// is another run's (in use, or holding an earlier run without --overwrite or --resume); kStorage (exit 6)
// when it cannot be created, is not this user's, or others can write it.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <string_view>

#include "core/logging.h"
#include "core/record.h"
#include "core/safe_file.h"  // WriteFileAtomically, for the run directory's files
#include "core/status.h"
#include "jobs/spec.h"

namespace tessel::orchestrator {

// Every entry a run writes into its directory: --overwrite removes these and nothing else, and a
// directory holding any of them holds an earlier run.
inline constexpr std::array<std::string_view, 7> kRunDirEntries = {
    "job.toml", "metrics.csv", "summary.json", "targets.json", "weights", "checkpoints", "report.html"};
// The claim: "pid PID host HOST\n", created O_EXCL, removed when the run ends.
inline constexpr std::string_view kRunLockName = ".tessel-run.lock";

// How `tessel run` may use a directory that already holds a run.
enum class RunDirUse {
  kNew,        // refuse it (exit 2)
  kOverwrite,  // `--overwrite`: remove the earlier run's entries (kRunDirEntries) first
  kResume,     // `--resume`: continue it
};

// A run directory held by this process. The lock file goes when the claim does (also when the run
// fails); a process killed outright leaves it, and the next run on this host takes it over, saying so.
class RunDirClaim {
 public:
  // Claims `dir` (spec.job.output_dir, or for kResume ResumeRunDir's; created 0700 if missing, else
  // checked as core/safe_file.h's EnsurePrivateDirectory does), or, when `dir` is "", a new
  // runs/<spec.job.name>-<UTC yyyymmdd-hhmmss>[-N]. A directory another live run holds is kUsage naming its
  // pid and host; one holding an earlier run is kUsage for kNew, emptied of kRunDirEntries for kOverwrite
  // (kUsage naming it when its weights/ or checkpoints/ holds a file Tessel does not write there).
  static Result<std::unique_ptr<RunDirClaim>> Take(const std::string& dir, const jobs::JobSpec& spec, RunDirUse use,
                                                   const std::string& host, const Logger& log);
  ~RunDirClaim();
  RunDirClaim(const RunDirClaim&) = delete;
  RunDirClaim& operator=(const RunDirClaim&) = delete;

  const std::string& dir() const { return dir_; }
  // Whether this run made the directory (or found it empty): a run that fails before its first step
  // removes what it wrote, and then the directory.
  bool created() const { return created_; }
  // Removes the lock now (before the directory itself is discarded).
  void Release();

 private:
  RunDirClaim(std::string dir, std::string lock, bool created)
      : dir_(std::move(dir)), lock_(std::move(lock)), created_(created) {}
  std::string dir_;
  std::string lock_;  // its path; "" once released
  bool created_;
};

// For `tessel run --resume`: spec.job.output_dir when set; else, when checkpoint.dir is set, a new
// run directory; else the newest runs/<name>-<stamp>[-N] that holds checkpoints (kUsage when none does).
// Returns "" for "a new run directory". Creates nothing: a refused resume leaves nothing behind.
Result<std::string> ResumeRunDir(const jobs::JobSpec& spec);

// Writes RUN_DIR/summary.json: the fields of `summary` in order (the coordinator assembles the common
// keys, the plan's facts and the executor's result).
Status WriteSummary(const std::string& run_dir, const Record& summary);

}  // namespace tessel::orchestrator
