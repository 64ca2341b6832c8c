// `tessel run`, `tessel validate` and `tessel plan`.
#include <iostream>

#include "core/cuda_device.h"
#include "core/logging.h"
#include "core/process_memory.h"
#include "jobs/spec.h"
#include "orchestrator/cli.h"
#include "orchestrator/coordinator.h"
#include "orchestrator/planners/registry.h"
#include "workers/comm/mpi_comm.h"
#include "workers/worker.h"

namespace tessel::cli {

namespace {

struct JobArgs {
  std::string job;
  std::vector<std::string> sets;
  std::string status_file;
  bool resume = false;
  bool overwrite = false;
  bool resume_force = false;
};

void AddJobArgs(CLI::App* cmd, JobArgs* args) {
  cmd->add_option("JOB", args->job, "The job file (TOML)")->required();
  cmd->add_option("--set", args->sets, "Override a job-file key: --set train.epochs=10 (repeatable)");
}

Status Run(const JobArgs& args) {
  TESSEL_ASSIGN_OR_RETURN(auto session, workers::MpiSession::Init(nullptr, nullptr));
  const bool is_worker = session->world_rank() != 0;
  TESSEL_ASSIGN_OR_RETURN(auto comm, workers::MpiWorkerComm::OverWorkers(is_worker));
  if (!is_worker) {
    orchestrator::RunRequest request{args.job, args.sets, args.status_file, args.resume || args.resume_force,
                                     args.overwrite};
    if (args.resume_force) request.resume_check = orchestrator::SettingsCheck::kWarnOnMismatch;
    return orchestrator::RunCoordinator(request, *session);
  }
  const Status st = workers::RunMpiWorker(*session, *comm);
  if (st.ok()) return st;
  // A worker fails only in a job that the coordinator aborts (MPI_Abort) or that lost its coordinator: it
  // must not wait in MPI_Finalize, nor for a send to a dead peer that the communicator would cancel and
  // wait for when destroyed (Open MPI cannot cancel a large send). The process ends next.
  session->SkipFinalize();
  (void)comm.release();
  return Status(st.code(), StrCat("rank ", session->world_rank(), ": ", st.message()));
}

Status Validate(const JobArgs& args) {
  TESSEL_ASSIGN_OR_RETURN(jobs::JobSpec spec, jobs::LoadJobFile(args.job, args.sets));
  TESSEL_RETURN_IF_ERROR(jobs::ValidateDataPaths(spec));
  TESSEL_ASSIGN_OR_RETURN(std::unique_ptr<orchestrator::Planner> planner, orchestrator::MakePlanner(spec));
  TESSEL_RETURN_IF_ERROR(planner->Check(spec));
  std::cout << args.job << ": ok: job '" << spec.job.name << "' (" << NameOf(spec.job.kind) << ", " << spec.model.name
            << ", " << spec.model.layers << " layers, hidden " << spec.model.hidden << ", " << planner->Length(spec)
            << ", data " << NameOf(spec.data.format) << ", " << spec.resources.workers << " workers)\n";
  return Status();
}

Status Plan(const JobArgs& args, int32_t workers) {
  TESSEL_ASSIGN_OR_RETURN(jobs::JobSpec spec, jobs::LoadJobFile(args.job, args.sets));
  TESSEL_RETURN_IF_ERROR(jobs::ValidateDataPaths(spec));
  if (workers <= 0) workers = spec.resources.workers;
  Logger log("plan", LogLevel::kWarn);
  TESSEL_ASSIGN_OR_RETURN(std::unique_ptr<orchestrator::Planner> planner, orchestrator::MakePlanner(spec));
  TESSEL_ASSIGN_OR_RETURN(orchestrator::Plan plan, planner->MakePlan(spec, workers, log));
  planner->Print(spec, plan, std::cout);
  // What `tessel run` would refuse on a host like this one (workers/host_limits.h CheckMemory).
  const int64_t host = HostMemoryBytes();
  const bool cpu = spec.job.device == jobs::DeviceChoice::kCpu ||
                   (spec.job.device == jobs::DeviceChoice::kAuto && !ProbeCuda().usable());
  for (size_t w = 0; w < plan.workers.size() && cpu && host > 0; ++w) {
    if (plan.workers[w].predicted_memory_bytes <= host) continue;
    std::cout << "worker " << w << " needs more memory ("
              << orchestrator::FormatBytes(plan.workers[w].predicted_memory_bytes)
              << ") than this host gives a process (" << orchestrator::FormatBytes(host)
              << "): on a CPU host like this one the run refuses it (exit 6); add workers or lower the model\n";
    break;
  }
  return Status();
}

}  // namespace

void RegisterRunCommands(CLI::App& app, Status* result) {
  auto run_args = std::make_shared<JobArgs>();
  CLI::App* run =
      app.add_subcommand("run", "Run a job: mpirun --enable-recovery -np N+1 tessel run JOB (or one process)");
  AddJobArgs(run, run_args.get());
  CLI::Option* resume =
      run->add_flag("--resume", run_args->resume,
                    "Continue from the latest checkpoint (checkpoint.dir, or the newest runs/NAME-* with checkpoints); "
                    "refused when the checkpoint was written with other model, data or training settings");
  CLI::Option* resume_force = run->add_flag(
      "--resume-force", run_args->resume_force,
      "--resume, also from a checkpoint written with other settings (each difference is logged as a warning)");
  run->add_flag("--overwrite", run_args->overwrite,
                "Replace the earlier run in job.output_dir (its summary, metrics, weights and checkpoints) instead "
                "of refusing it")
      ->excludes(resume)
      ->excludes(resume_force);
  run->add_option("--status-file", run_args->status_file,
                  "Write the job's exit code and error as JSON here (mpirun --enable-recovery always exits 0)");
  run->callback([=] { *result = Run(*run_args); });

  auto val_args = std::make_shared<JobArgs>();
  CLI::App* validate = app.add_subcommand("validate", "Check a job file and its input paths without running it");
  AddJobArgs(validate, val_args.get());
  validate->callback([=] { *result = Validate(*val_args); });

  auto plan_args = std::make_shared<JobArgs>();
  auto plan_workers = std::make_shared<int32_t>(0);
  CLI::App* plan = app.add_subcommand("plan", "Print the partition plan with predicted time and memory per worker");
  AddJobArgs(plan, plan_args.get());
  plan->add_option("--workers", *plan_workers, "Number of workers to plan for (default: resources.workers)");
  plan->callback([=] { *result = Plan(*plan_args, *plan_workers); });
}

}  // namespace tessel::cli
