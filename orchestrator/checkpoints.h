// The coordinator's side of checkpoints (DESIGN.md "Checkpoints"): once every worker has written its shard
// of step k (storage/checkpoint_shard.h), the coordinator writes DIR/step-k/manifest.json with each shard's
// size and CRC-32, the job's name and its trajectory settings (jobs::TrajectorySettings), then replaces
// DIR/latest atomically, last; older checkpoints beyond `keep` go. A run killed at any moment leaves
// `latest` naming a complete checkpoint.
//
// One checkpoint directory belongs to one job: ClaimCheckpointDir writes DIR/job (the job's name) when the
// directory is first used, and refuses a directory that holds another job's. Pruning removes only this
// job's checkpoint directories, and only those holding nothing but the files Tessel writes there.
//
// On `tessel run --resume`, FindResumePoint starts from `latest`; a checkpoint whose manifest is missing
// or whose shards do not match it (size, CRC-32), or which another job wrote, is skipped, saying why, for
// the newest older one that verifies. A checkpoint written with other trajectory settings is refused,
// naming the first key that differs, unless the caller forces it (`--resume-force`).
//
// Thread safety: free functions. Failure: kStorage (exit 6) for files that cannot be written and for a
// symbolic link where Tessel writes; kUsage when no checkpoint can be resumed (naming the directory and
// why each candidate was refused), when the checkpoint was written by another number of workers or with
// other settings, or when the directory belongs to another job.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/logging.h"
#include "core/status.h"
#include "storage/checkpoint_shard.h"

namespace tessel::orchestrator {

// Whose a checkpoint is: what the manifest records and a resume compares.
struct CheckpointOwner {
  std::string job;                                            // job.name
  std::vector<std::pair<std::string, std::string>> settings;  // jobs::TrajectorySettings(spec)
};

// Creates DIR (core/safe_file.h EnsurePrivateDirectory) and claims it for `job`: DIR/job names the job
// whose checkpoints the directory holds. A directory claimed by, or (before claims existed) holding a
// manifest of, another job is kUsage naming both jobs. `*claimed` is set to DIR/job when this call
// created it (empty otherwise), so that a run which ends before its first step can remove it again.
Status ClaimCheckpointDir(const std::string& dir, const std::string& job, std::string* claimed, const Logger& log);

// The first entry under a checkpoint directory that Tessel did not write there, as a path relative to it
// ("" when there is none): `tessel run --overwrite` removes a run's checkpoints/ only when it is "".
std::string FirstStrangerInCheckpointDir(const std::string& dir);

Status CommitCheckpoint(const std::string& dir, const CheckpointOwner& owner, int64_t step,
                        const std::vector<storage::FileDigest>& shards, int32_t keep, const Logger& log);

enum class SettingsCheck {
  kRefuseMismatch,  // --resume: another job's settings are kUsage
  kWarnOnMismatch,  // --resume-force: they are logged as a warning, and the resume goes on
};

struct ResumePoint {
  std::string step_dir;
  int64_t step = 0;
};
// Reads only: nothing on disk changes, whatever it returns.
Result<ResumePoint> FindResumePoint(const std::string& dir, const CheckpointOwner& owner, int32_t workers,
                                    SettingsCheck check, const Logger& log);

// After a resume from `step`: this job's checkpoints newer than it (damaged ones) are renamed to
// step-K.refused (step-K.refused.N when that name is taken), so that this run's checkpoints of the same
// steps never meet their files. CommitCheckpoint prunes them by the keep rule, once superseded.
void SetAsideNewerCheckpoints(const std::string& dir, const std::string& job, int64_t step, const Logger& log);

}  // namespace tessel::orchestrator
