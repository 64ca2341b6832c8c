// `tessel smoke`: checks an allocation under mpirun before a job spends it (orchestrator/smoke.h).
#include <iostream>
#include <memory>

#include "orchestrator/cli.h"
#include "orchestrator/smoke.h"

namespace tessel::cli {

void RegisterSmokeCommand(CLI::App& app, Status* result) {
  auto req = std::make_shared<orchestrator::SmokeRequest>();
  orchestrator::SmokeLimits& l = req->limits;
  CLI::App* smoke = app.add_subcommand(
      "smoke", "Check every node of an allocation: mpirun -np N tessel smoke [JOB] (one row per rank, exit != 0 on any FAIL)");
  smoke->add_option("JOB", req->job, "A job file: its spill.dir, plugins and device are checked");
  smoke->add_option("--set", req->sets, "Override a job-file key (repeatable)");
  smoke->add_option("--spill-dir", req->spill_dir, "The node-local spill directory (default: the job's spill.dir)");
  smoke->add_option("--plugin", req->plugins, "Also check this plugin .so (repeatable)");
  smoke->add_option("--json", req->json_path, "Rank 0 writes every row and failure here as JSON");
  smoke->add_option("--max-latency-us", l.max_latency_us, "Point-to-point latency limit, one way")->capture_default_str();
  smoke->add_option("--min-bandwidth-mbs", l.min_bandwidth_mb_s, "Point-to-point bandwidth floor (MB/s)")->capture_default_str();
  smoke->add_option("--max-allreduce-ms", l.max_allreduce_ms, "Limit for a 1 MiB float allreduce")->capture_default_str();
  smoke->add_option("--min-spill-free-mb", l.min_spill_free_mb, "Free space the spill directory must have")->capture_default_str();
  smoke->add_option("--min-spill-mbs", l.min_spill_mb_s, "Spill write and read bandwidth floor (MB/s)")->capture_default_str();
  smoke->add_option("--min-gpus", l.min_gpus, "Usable GPUs each rank must see (a job with job.device = \"cuda\": at least 1)")
      ->capture_default_str();
  smoke->add_option("--timeout", l.timeout_seconds, "Seconds any one message may take before its rank FAILs")
      ->capture_default_str();
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
