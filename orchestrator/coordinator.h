// The coordinator: world rank 0 of `tessel run`. It parses and validates the job, has the job kind's
// planner (orchestrator/planners/) turn it into one assignment per worker, sends them, watches heartbeats
// and progress, gathers the results and writes RUN_DIR/summary.json. It knows no model and no job kind:
// plans, progress and results are opaque payloads and Records. With a world of one process it also plays
// the worker (the embedded default).
//
// Failure handling: an error before dispatch stops the workers cleanly and returns its Status. After
// dispatch, a worker's reported error or a worker silent for longer than
// [timeouts] heartbeat_timeout_seconds ends the whole job with MPI_Abort and the matching exit code
// (5 for a dead or hung rank), after a message naming the rank and the step.
// Checkpoints: the first worker reports each checkpoint whose shards are all on disk; the coordinator then
// writes its manifest and `latest` (orchestrator/checkpoints.h). With RunRequest::resume it finds the
// checkpoint to continue from before dispatch, and reuses that run's directory when job.output_dir is unset.
// Thread safety: call once, from the main thread.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "orchestrator/checkpoints.h"
#include "workers/comm/mpi_comm.h"

namespace tessel::orchestrator {

struct RunRequest {
  std::string job_path;
  std::vector<std::string> overrides;
  // When set, the coordinator writes {"exit_code": N, "error": "..."} here at the end, also when it
  // aborts the job: `mpirun --enable-recovery` itself always exits 0 (Open MPI 4.1).
  std::string status_file;
  // `tessel run --resume`: continue from the newest checkpoint that verifies (orchestrator/checkpoints.h).
  bool resume = false;
  // `tessel run --overwrite`: a job.output_dir holding an earlier run is emptied of that run's files
  // (orchestrator/run_output.h) instead of refused.
  bool overwrite = false;
  // `--resume-force`: a checkpoint written with other trajectory settings is resumed, with a warning per
  // key that differs, instead of refused.
  SettingsCheck resume_check = SettingsCheck::kRefuseMismatch;
};

Status RunCoordinator(const RunRequest& request, workers::MpiSession& session);

}  // namespace tessel::orchestrator
