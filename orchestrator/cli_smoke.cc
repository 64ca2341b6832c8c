// `tessel smoke`: checks an allocation under mpirun before a job spends it (orchestrator/smoke.h).
#include <iostream>
#include <memory>

#include "orchestrator/cli.h"
#include "orchestrator/smoke.h"

namespace tessel::cli {

void RegisterSmokeCommand(CLI::App& app, Status* result) {
  auto req = std::make_shared<orchestrator::SmokeRequest>();
  orchestrator::SmokeOverrides& l = req->limits;
  CLI::App* smoke = app.add_subcommand(
      "smoke",
      "Check every node of an allocation: mpirun -np N tessel smoke [JOB] (one row per rank, exit != 0 on any FAIL)");
  smoke->add_option("JOB", req->job, "A job file: its [smoke] limits, spill.dir, plugins and device");
  smoke->add_option("--set", req->sets, "Override a job-file key (repeatable)");
  smoke->add_option("--spill-dir", req->spill_dir, "The node-local spill directory (default: the job's spill.dir)");
  smoke->add_option("--plugin", req->plugins, "Also check this plugin .so (repeatable)");
  smoke->add_option("--json", req->json_path, "Rank 0 writes every row and failure here as JSON");
  // Each limit overrides the job's [smoke] key of the same name (jobs/README.md gives the defaults).
  smoke->add_option("--max-latency-us", l.max_latency_us,
                    "smoke.max_latency_us: point-to-point latency limit, one way");
  smoke->add_option("--min-bandwidth-mbs", l.min_bandwidth_mb_s,
                    "smoke.min_bandwidth_mb_s: point-to-point bandwidth floor");
  smoke->add_option("--max-allreduce-ms", l.max_allreduce_ms,
                    "smoke.max_allreduce_ms: limit for a 1 MiB float allreduce");
  smoke->add_option("--min-spill-free-mb", l.min_spill_free_mb,
                    "smoke.min_spill_free_mb: free space in the spill directory");
  smoke->add_option("--min-spill-mbs", l.min_spill_mb_s, "smoke.min_spill_mb_s: spill write and read bandwidth floor");
  smoke->add_option("--min-gpus", l.min_gpus, "smoke.min_gpus: usable GPUs each rank must see");
  smoke->add_option("--timeout", l.timeout_seconds, "smoke.timeout_seconds: for any one message to arrive");
  smoke->callback([=] {
    Result<std::unique_ptr<workers::MpiSession>> session = workers::MpiSession::Init(nullptr, nullptr);
    if (!session.ok()) {
      *result = session.status();
      return;
    }
    *result = orchestrator::RunSmoke(*req, **session, std::cout);
  });
}

}  // namespace tessel::cli
