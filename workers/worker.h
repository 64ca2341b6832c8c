// The worker runtime: runs the training of one partition, either inside an MPI worker rank
// (RunMpiWorker) or inside the embedded single-process run (RunPartition, called by the coordinator).
// Workers never exit(): every failure comes back as a Status, and an MPI worker reports it to the
// coordinator, which ends the job with the matching exit code.
#pragma once

#include <atomic>
#include <functional>

#include "core/logging.h"
#include "core/status.h"
#include "jobs/spec.h"
#include "monitoring/metrics.h"
#include "storage/partition.h"
#include "workers/comm/comm.h"
#include "workers/comm/mpi_comm.h"
#include "workers/protocol.h"

namespace tessel::workers {

using EpochCallback = std::function<void(const ProgressMsg&)>;

struct RunHooks {
  EpochCallback on_epoch;                // called on every worker after each epoch (may be empty)
  std::atomic<int64_t>* step = nullptr;  // published for the heartbeat thread (may be null)
  monitoring::Metrics* metrics = nullptr;
};

// Trains `part` as described by `spec`, with the given worker communicator. Loads the plugins named
// by the job (or the default plugin dir) and checks every op the model needs before the first step.
Result<ResultMsg> RunPartition(const jobs::JobSpec& spec, const storage::WorkerPartition& part, WorkerComm& comm,
                               const RunHooks& hooks, const Logger& log);

// The whole life of an MPI worker rank: wait for the assignment, run, report. Returns the process
// exit code (0 even on failure once the coordinator has been told, since it aborts the job).
int RunMpiWorker(MpiSession& session, MpiWorkerComm& comm);

}  // namespace tessel::workers
