// `tessel smoke`: is an allocation fit for a job? Run under mpirun with one rank per slot the job would
// use (`mpirun -np N tessel smoke [JOB]`); every rank checks its own node and the network between it and
// rank 0, and rank 0 prints one table, one row per rank, each check PASS or FAIL against the thresholds:
//   - MPI reachability: every rank answers rank 0 within the timeout;
//   - point-to-point latency (8 bytes) and bandwidth (4 MiB) between rank 0 and each rank, ping-pong;
//   - the time of a 1 MiB float allreduce over all ranks;
//   - the spill directory (the job's spill.dir, or --spill-dir): free space, and write and read bandwidth
//     through the spill store itself (as the stage planner measures it);
//   - every plugin of the job (or --plugin) loads and passes `tessel plugin check`, and they load together;
//   - the GPUs this rank sees and their memory; with a GPU on every rank, an NCCL allreduce.
// The limits are the job's [smoke] keys (jobs/README.md), or their defaults without a job, each
// overridden by its flag. Any FAIL exits non-zero on every rank, with the code of the first failing
// column: 5 (MPI, network, GPUs), 4 (plugins), 6 (spill). Thread safety: one thread per rank. Collective
// over MPI_COMM_WORLD.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "core/status.h"
#include "workers/comm/mpi_comm.h"

namespace tessel::orchestrator {

// The flags of `tessel smoke`: each, when given, overrides the job's [smoke] key of the same name
// (jobs/spec.h SmokeSection, where the defaults live).
struct SmokeOverrides {
  std::optional<double> max_latency_us, min_bandwidth_mb_s, max_allreduce_ms, min_spill_free_mb, min_spill_mb_s,
      timeout_seconds;
  std::optional<int32_t> min_gpus;
};

struct SmokeRequest {
  std::string job;                   // optional: its [smoke] limits, spill.dir, plugins and device
  std::vector<std::string> sets;     // --set overrides of the job
  std::string spill_dir;             // overrides the job's spill.dir
  std::vector<std::string> plugins;  // checked as well as the job's (or the built-in ones)
  std::string json_path;             // rank 0 writes the rows here as JSON when set
  SmokeOverrides limits;
};

Status RunSmoke(const SmokeRequest& request, workers::MpiSession& session, std::ostream& out);

}  // namespace tessel::orchestrator
