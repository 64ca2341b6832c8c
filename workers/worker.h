// The worker runtime: runs one assignment, either inside an MPI worker rank (RunMpiWorker) or inside the
// embedded single-process run (RunAssignment, called by the coordinator). It knows no model and no job
// kind: it loads the plugins, picks the device, builds the executor the payload names through the
// executor registry, runs its steps with heartbeats and progress, and reports the result.
// Workers never exit(): every failure comes back as a Status, and an MPI worker reports it to the
// coordinator, which ends the job with the matching exit code.
#pragma once

#include <atomic>
#include <functional>
#include <memory>

#include "core/logging.h"
#include "core/record.h"
#include "core/status.h"
#include "monitoring/metrics.h"
#include "workers/assignment.h"
#include "workers/comm/comm.h"
#include "workers/comm/mpi_comm.h"
#include "workers/host_limits.h"  // Launch
#include "workers/protocol.h"

namespace tessel::workers {

using StepCallback = std::function<void(const ProgressMsg&)>;

struct RunHooks {
  StepCallback on_step;                  // called on every worker after each step (may be empty)
  std::atomic<int64_t>* step = nullptr;  // published for the heartbeat thread (may be null)
  monitoring::Metrics* metrics = nullptr;
  std::string run_dir;  // RUN_DIR, where executors may write outputs (trained weights)
  // Called on the first worker once every worker's shard of a checkpoint is on disk: the coordinator
  // writes the manifest and `latest` (may be empty: then nobody does).
  std::function<Status(const CheckpointMsg&)> on_checkpoint;
  Launch launch = Launch::kEmbedded;
  // The plan's estimate of this worker's memory (WorkerPlan::predicted_memory_bytes; 0 = none): a CPU
  // worker refuses a share larger than its host's memory before allocating (host_limits.h CheckMemory).
  int64_t predicted_memory_bytes = 0;
};

// Runs `payload` to the end with the given worker communicator and returns the executor's result plus
// the runtime's own figures: per-step arrays "<unit>_loss", "<unit>_seconds" and "<unit>_<timing>"
// (epoch_loss, epoch_seconds, ... for an executor whose step is an epoch), "device" and
// "peak_worker_rss_bytes". With settings.checkpoint_every_steps > 0 it writes a checkpoint shard every
// that many steps; with settings.resume_step_dir it first loads this worker's shard and continues after
// settings.resume_step (the per-step arrays then hold every step, the restored ones first).
Result<Record> RunAssignment(const WorkerSettings& settings, std::unique_ptr<AssignmentPayload> payload,
                             WorkerComm& comm, const RunHooks& hooks, const Logger& log);

// The whole life of an MPI worker rank: wait for the assignment, run, report. OK once the job ended;
// otherwise the rank's exit code and what to print: "stopped; the coordinator has the cause" when the
// coordinator reports it, or the cause itself when the coordinator cannot (it died, or the rank could not
// reach it). Not OK means the coordinator is aborting or gone: the caller must not MPI_Finalize
// (MpiSession::SkipFinalize). A rank whose coordinator dies mid-run exits 5 from its heartbeat thread.
Status RunMpiWorker(MpiSession& session, MpiWorkerComm& comm);

}  // namespace tessel::workers
