// The coordinator's side of checkpoints (DESIGN.md "Checkpoints"): once every worker has written its shard
// of step k (storage/checkpoint_shard.h), the coordinator writes DIR/step-k/manifest.json with each shard's
// size and CRC-32, then replaces DIR/latest atomically, last; older checkpoints beyond `keep` go. A run
// killed at any moment leaves `latest` naming a complete checkpoint.
//
// On `tessel run --resume`, FindResumePoint starts from `latest`; a checkpoint whose manifest is missing
// or whose shards do not match it (size, CRC-32) is skipped, saying why, for the newest older one that
// verifies.
//
// Thread safety: free functions. Failure: kStorage for files that cannot be written; kUsage when no
// checkpoint can be resumed (naming the directory and why each candidate was refused), or when the
// checkpoint was written by another number of workers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/logging.h"
#include "core/status.h"
#include "storage/checkpoint_shard.h"

namespace tessel::orchestrator {

Status CommitCheckpoint(const std::string& dir, const std::string& job, int64_t step,
                        const std::vector<storage::FileDigest>& shards, int32_t keep, const Logger& log);

struct ResumePoint {
  std::string step_dir;
  int64_t step = 0;
};
Result<ResumePoint> FindResumePoint(const std::string& dir, int32_t workers, const Logger& log);

}  // namespace tessel::orchestrator
