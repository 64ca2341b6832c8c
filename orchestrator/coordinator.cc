#include "orchestrator/coordinator.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <variant>

#include "core/json.h"
#include "core/logging.h"
#include "core/process_memory.h"
#include "core/safe_file.h"
#include "core/stop_signal.h"
#include "core/version.h"
#include "jobs/carry.h"
#include "jobs/spec.h"
#include "monitoring/exporter.h"
#include "monitoring/metrics.h"
#include "monitoring/run_csv.h"
#include "monitoring/straggler.h"
#include "monitoring/targets.h"
#include "orchestrator/checkpoints.h"
#include "orchestrator/liveness.h"
#include "orchestrator/planners/registry.h"
#include "orchestrator/progress_printer.h"
#include "orchestrator/run_output.h"
#include "orchestrator/startup_watch.h"
#include "orchestrator/worker_state.h"
#include "workers/comm/comm.h"
#include "workers/protocol.h"
#include "workers/worker.h"

namespace tessel::orchestrator {

namespace {

using Clock = std::chrono::steady_clock;
using Seconds = std::chrono::duration<double>;
using workers::ProgressMsg;

// What every worker runtime needs from the job, whatever it trains.
// (Carried from the schema rows, jobs/carry.h; the checkpoint and resume fields are the coordinator's.)
workers::WorkerSettings SettingsFor(const jobs::JobSpec& spec) {
  return jobs::CarryFrom<workers::WorkerSettings>(
      spec, {.sections = {"job", "resources", "timeouts", "train", "metrics"},
             .renamed = {{"job_name", "job.name"},
                         {"threads", "resources.threads_per_worker"},
                         {"plugin_paths", "plugins.paths"},
                         {"plugin_search_dirs", "plugins.search_dirs"},
                         {"plugin_prefer", "plugins.prefer"},
                         {"metrics_bind", "metrics.bind"},
                         {"metrics_port_base", "metrics.port_base"},
                         {"step_timeout_seconds", "timeouts.step_seconds"},
                         {"startup_timeout_seconds", "timeouts.startup_seconds"}},
             .derived = {"checkpoint_dir", "checkpoint_every_steps", "resume_step_dir", "resume_step"}});
}

class Coordinator {
 public:
  Coordinator(workers::MpiSession& session, const jobs::JobSpec& spec, const RunRequest& request, const Logger& log)
      : session_(session),
        spec_(spec),
        status_file_(request.status_file),
        resume_(request.resume),
        resume_check_(request.resume_check),
        log_(log),
        run_dir_use_(request.resume      ? RunDirUse::kResume
                     : request.overwrite ? RunDirUse::kOverwrite
                                         : RunDirUse::kNew) {}

  // Thread safety: main thread; with workers it runs a StartupWatch until the watch loop takes over.
  Status Run();
  // Whether the workers have been told that the job ended (after that, a failure here concerns only
  // this rank's outputs).
  bool workers_released() const { return workers_released_; }

 private:
  Status StartMetrics(const std::string& role);
  // Where the targets file goes: metrics.targets_file, or RUN_DIR/targets.json.
  std::string TargetsPath() const;
  // One worker's step: its row of metrics.csv, and the loss history of a failure's summary.json.
  void RecordStep(int rank, const ProgressMsg& p);
  // After training began, a failed run still writes summary.json: what it has, the error, the rank.
  void WriteFailureSummary(const Status& st);
  // Everything a failure does before the job ends: the failed state, summary.json, and (after training
  // began) a last scrape.
  void Fail(const Status& st);
  // The step of the newest checkpoint on disk: this run's last, or the one it resumed from (0 = none).
  int64_t LastCheckpoint() const { return last_checkpoint_ > 0 ? last_checkpoint_ : resume_point_.step; }
  // The error for a bad loss reported by a worker, with the checkpoint to resume from.
  Status BadLossError(const std::string& who, const std::string& message) const;
  // Once job.time_limit_seconds has passed since the run began, the stop request of a signal
  // (core/stop_signal.h): the workers stop after their current step, state saved, and the run exits 7.
  void RaiseStopAtTimeLimit() const {
    const double limit = spec_.job.time_limit_seconds;
    if (limit > 0 && StopSignal() == 0 && Seconds(Clock::now() - start_).count() > limit) RequestStop(kTimeLimitStop);
  }
  // What made the run stop, for messages: "SIGTERM", or "the time limit (job.time_limit_seconds = 90)".
  std::string StopCause(const std::string& name) const;
  std::string StopCause(int signal) const { return StopCause(SignalName(signal)); }
  Status RunJob();
  // The failure's records (Fail without stopping the start-up watch): under outputs_mu_ or with the
  // start-up watch stopped.
  void RecordFailure(const Status& st);
  // The start-up watch's report of a dead worker, from its thread: ends the job (exit 5).
  [[noreturn]] void FailFromStartupWatch(int rank, const Status& st);
  // Stops the start-up watch (none: nothing) and returns what it learned, by world rank.
  std::vector<StartupWatch::Sighting> StopStartupWatch();
  void SetPhase(const char* phase) {
    if (startup_watch_) startup_watch_->SetPhase(phase);
  }
  Status RunEmbedded(Plan& plan, Record* result);
  Status RunDistributed(Plan& plan, Record* result);
  Status DispatchAndWatch(Plan& plan, Record* result);
  Status WriteTargets(const std::vector<monitoring::Target>& targets);
  // Before anything is written: the checkpoint directory, and on --resume the checkpoint to load (a
  // refusal leaves nothing behind).
  Status FindCheckpoints(int32_t workers);
  // In the claimed run directory: claims the checkpoint directory for this job, sets aside the checkpoints
  // newer than the one resumed and writes job.toml, noting what it created for DiscardUnusedRunDir.
  Status TakeRunDir(const std::string& step_unit);
  Status Commit(const workers::CheckpointMsg& m);
  workers::WorkerSettings Settings() const;
  // A job that fails before its first step leaves nothing behind (README, "Exit codes"): the run
  // directory this run created goes, when it holds only what the run wrote before training; in a run
  // directory that was there (a --resume), the files it added go and job.toml is restored.
  void DiscardUnusedRunDir();

  workers::MpiSession& session_;
  const jobs::JobSpec& spec_;
  std::string status_file_;
  bool resume_ = false;
  SettingsCheck resume_check_;
  std::string checkpoint_dir_;
  CheckpointOwner owner_;  // what this run's manifests record
  ResumePoint resume_point_;
  const Logger& log_;
  RunDirUse run_dir_use_;
  std::unique_ptr<RunDirClaim> run_dir_claim_;  // held until the coordinator goes
  std::string run_dir_;
  bool run_dir_created_ = false;  // absent or empty when this run took it
  // What this run added to a run or checkpoint directory that was there, for DiscardUnusedRunDir.
  std::vector<std::string> added_files_;
  std::optional<std::string> replaced_job_toml_;  // the earlier job.toml's text, when there was one
  std::string created_checkpoint_dir_;            // when this run created checkpoint.dir
  int64_t steps_done_ = 0;                        // the highest step any rank reported
  std::unique_ptr<monitoring::Metrics> metrics_;
  std::unique_ptr<monitoring::Exporter> exporter_;
  bool workers_released_ = false;
  Clock::time_point start_ = Clock::now();
  std::string step_unit_ = "step";
  std::vector<double> losses_;   // by step, as the first worker reported them
  int failed_rank_ = -1;         // the rank a failure concerns, when one does
  int64_t last_checkpoint_ = 0;  // the step of the last checkpoint committed (0 = none)
  std::optional<monitoring::RunCsv> csv_;
  // Held by the main thread while it changes what a failure's records touch (the run directory, metrics_)
  // before training, and by the start-up watch's thread while it fails the job.
  std::mutex outputs_mu_;
  std::unique_ptr<StartupWatch> startup_watch_;  // from Run() until the watch loop (or a failure) stops it
};

// The address Prometheus should scrape a rank's exporter at: the bound address itself, unless it is a
// wildcard (0.0.0.0, ::), which the rank's host name stands for.
std::string TargetHost(const std::string& bind, const std::string& host) {
  return bind == "0.0.0.0" || bind == "::" || bind == "[::]" ? host : bind;
}

Status Coordinator::StartMetrics(const std::string& role) {
  metrics_ = std::make_unique<monitoring::Metrics>(monitoring::RankLabels{spec_.job.name, 0, role}, kTesselVersion);
  metrics_->SetJobState("planning");
  metrics_->Set("tessel_resident_memory_bytes", static_cast<double>(ResidentBytes()));
  TESSEL_ASSIGN_OR_RETURN(monitoring::RunCsv csv, monitoring::RunCsv::Open(run_dir_ + "/metrics.csv"));
  csv_.emplace(std::move(csv));
  if (spec_.metrics.port_base <= 0) return Status();
  if (const std::string warning = monitoring::ExposureWarning(spec_.metrics.bind, spec_.metrics.port_base);
      !warning.empty()) {
    log_.Warn(warning);
  }
  auto started = monitoring::Exporter::Start(spec_.metrics.bind, spec_.metrics.port_base, *metrics_);
  if (!started.ok()) {
    return UsageError(StrCat("metrics.port_base: rank 0 on ", session_.hostname(), " cannot serve its metrics on port ",
                             spec_.metrics.port_base, ": ", started.status().message(),
                             " (choose a free metrics.port_base, or 0 to serve none)"));
  }
  exporter_ = std::move(started).value();
  // Before training: an unwritable targets file is an error now, not a warning after the ranks started.
  // An empty list is a valid file_sd file that Prometheus reads as "no targets yet".
  if (Status st = WriteTargets({}); !st.ok()) {
    return Status(st.code(), StrCat("metrics.targets_file: ", st.message()));
  }
  return Status();
}

std::string Coordinator::TargetsPath() const {
  return spec_.metrics.targets_file.empty() ? run_dir_ + "/targets.json" : spec_.metrics.targets_file;
}

Status Coordinator::WriteTargets(const std::vector<monitoring::Target>& targets) {
  if (spec_.metrics.port_base <= 0) return Status();
  TESSEL_RETURN_IF_ERROR(monitoring::WriteTargetsFile(TargetsPath(), spec_.job.name, targets));
  if (!targets.empty()) log_.Info("Prometheus targets: " + TargetsPath());
  return Status();
}

void Coordinator::RecordStep(int rank, const ProgressMsg& p) {
  if (rank == 1 || session_.world_size() == 1) {
    if (losses_.size() < static_cast<size_t>(p.step)) losses_.resize(static_cast<size_t>(p.step), std::nan(""));
    if (p.step >= 1) losses_[static_cast<size_t>(p.step - 1)] = p.loss;
  }
  if (!csv_) return;
  if (Status st = csv_->Append(rank, p.step, p.figures); !st.ok()) {
    log_.Warn(StrCat(st.message(), ": metrics.csv stops here; the training goes on"));
    csv_.reset();
  }
}

Status Coordinator::BadLossError(const std::string& who, const std::string& message) const {
  std::string resume = "checkpoints are off (checkpoint.every_steps = 0)";
  if (const int64_t last = LastCheckpoint(); last > 0) {
    resume = StrCat("the last checkpoint, ", checkpoint_dir_, "/step-", last,
                    ", is kept: tessel run --resume continues from it");
  } else if (spec_.checkpoint.every_steps > 0) {
    resume =
        StrCat("no checkpoint was written before it (checkpoint.every_steps = ", spec_.checkpoint.every_steps, ")");
  }
  return Status(Code::kBadLoss, StrCat(who, ": ", message, "; ", resume));
}

void Coordinator::Fail(const Status& st) {
  // This thread reports it: the start-up watch (whose thread may be reporting a dead worker now, and then
  // ends the process first) is stopped before anything is touched.
  StopStartupWatch();
  RecordFailure(st);
}

std::vector<StartupWatch::Sighting> Coordinator::StopStartupWatch() {
  if (!startup_watch_) return {};
  std::vector<StartupWatch::Sighting> seen = startup_watch_->Stop();
  startup_watch_.reset();
  return seen;
}

void Coordinator::FailFromStartupWatch(int rank, const Status& st) {
  std::lock_guard<std::mutex> lock(outputs_mu_);
  failed_rank_ = rank;
  RecordFailure(st);
  AbortJob(st, status_file_);
}

void Coordinator::RecordFailure(const Status& st) {
  if (metrics_) metrics_->SetJobState("failed");
  if (metrics_ && st.code() == Code::kBadLoss) metrics_->Add("tessel_bad_loss_total", 1);
  DiscardUnusedRunDir();
  WriteFailureSummary(st);
  // Only once training began: a job refused before it (a bad plugin, a port in use) has nothing to alert on
  // that its exit code does not say, and should not make its user wait.
  const double linger = spec_.metrics.final_scrape_seconds;
  if (exporter_ && linger > 0 && steps_done_ > 0) {
    log_.Info(
        StrCat("keeping the metrics exporter up ", linger, " s for a last scrape (metrics.final_scrape_seconds)"));
    std::this_thread::sleep_for(Seconds(linger));
  }
}

void Coordinator::WriteFailureSummary(const Status& st) {
  if (run_dir_.empty() || steps_done_ <= 0) return;  // nothing trained: the run directory is discarded
  Record summary;
  Set(summary, "job", spec_.job.name);
  Set(summary, "kind", std::string(NameOf(spec_.job.kind)));
  Set(summary, "outcome", "failed");
  Set(summary, "error", st.message());
  Set(summary, "exit_code", static_cast<int64_t>(st.exit_code()));
  Set(summary, "exit_reason", std::string(CodeName(st.code())));
  if (failed_rank_ >= 0) Set(summary, "failed_rank", static_cast<int64_t>(failed_rank_));
  Set(summary, step_unit_ + "s_done", steps_done_);
  Set(summary, step_unit_ + "_loss", losses_);
  if (const int64_t last = LastCheckpoint(); last > 0)
    Set(summary, "last_checkpoint", StrCat(checkpoint_dir_, "/step-", last));
  Set(summary, "wall_seconds", Seconds(Clock::now() - start_).count());
  Set(summary, "version", kTesselVersion);
  if (Status written = WriteSummary(run_dir_, summary); !written.ok()) {
    log_.Warn("could not write the failed run's summary.json: " + written.message());
    return;
  }
  std::fprintf(stderr, "tessel: summary of the failed run: %s/summary.json\n", run_dir_.c_str());
}

workers::WorkerSettings Coordinator::Settings() const {
  workers::WorkerSettings s = SettingsFor(spec_);
  if (spec_.checkpoint.every_steps > 0) {
    s.checkpoint_dir = checkpoint_dir_;
    s.checkpoint_every_steps = spec_.checkpoint.every_steps;
  }
  s.resume_step_dir = resume_point_.step_dir;
  s.resume_step = resume_point_.step;
  return s;
}

// The checkpoint directory is absolute: workers may start elsewhere.
Status Coordinator::FindCheckpoints(int32_t workers) {
  std::error_code ec;
  const std::string dir = spec_.checkpoint.dir.empty() ? run_dir_ + "/checkpoints" : spec_.checkpoint.dir;
  checkpoint_dir_ = std::filesystem::absolute(dir, ec).lexically_normal().string();
  if (ec) checkpoint_dir_ = dir;
  owner_ = CheckpointOwner{spec_.job.name, jobs::TrajectorySettings(spec_)};
  if (!resume_) return Status();
  TESSEL_ASSIGN_OR_RETURN(resume_point_, FindResumePoint(checkpoint_dir_, owner_, workers, resume_check_, log_));
  return Status();
}

Status Coordinator::TakeRunDir(const std::string& step_unit) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto absent = [&](const std::string& path) { return !fs::exists(fs::symlink_status(path, ec)); };
  run_dir_created_ = run_dir_claim_->created();  // made (or found empty) by the claim, with its lock
  for (const char* name : {"metrics.csv", "targets.json"}) {
    if (absent(run_dir_ + "/" + name)) added_files_.push_back(run_dir_ + "/" + name);
  }
  const std::string job_toml = run_dir_ + "/job.toml";
  if (absent(job_toml)) {
    added_files_.push_back(job_toml);
  } else if (std::ifstream in(job_toml, std::ios::binary); in) {
    replaced_job_toml_ = std::string(std::istreambuf_iterator<char>(in), {});
  }
  if (spec_.checkpoint.every_steps > 0 || resume_) {
    if (absent(checkpoint_dir_)) created_checkpoint_dir_ = checkpoint_dir_;
    std::string claimed;
    if (Status st = ClaimCheckpointDir(checkpoint_dir_, spec_.job.name, &claimed, log_); !st.ok()) {
      DiscardUnusedRunDir();
      return st;
    }
    if (!claimed.empty()) added_files_.push_back(claimed);
  }
  if (resume_) {
    SetAsideNewerCheckpoints(checkpoint_dir_, spec_.job.name, resume_point_.step, log_);
    log_.Info(StrCat("resuming from ", resume_point_.step_dir, " (", step_unit, " ", resume_point_.step, ")"));
  }
  if (Status st = WriteFileAtomically(job_toml, jobs::FormatJobToml(spec_)); !st.ok()) {
    DiscardUnusedRunDir();
    return st;
  }
  return Status();
}

Status Coordinator::Commit(const workers::CheckpointMsg& m) {
  std::vector<storage::FileDigest> shards(m.bytes.size());
  for (size_t i = 0; i < shards.size(); ++i) shards[i] = {m.bytes[i], static_cast<uint32_t>(m.crc32[i])};
  TESSEL_RETURN_IF_ERROR(CommitCheckpoint(checkpoint_dir_, owner_, m.step, shards, spec_.checkpoint.keep, log_));
  last_checkpoint_ = m.step;
  return Status();
}

std::string Coordinator::StopCause(const std::string& name) const {
  if (name != SignalName(kTimeLimitStop)) return name;
  char limit[32];
  std::snprintf(limit, sizeof limit, "%g", spec_.job.time_limit_seconds);
  return StrCat("the time limit (job.time_limit_seconds = ", limit, ")");
}

Status Coordinator::Run() {
  if (session_.world_size() > 1 && session_.thread_multiple()) {
    startup_watch_ =
        std::make_unique<StartupWatch>(session_.world_size(), spec_.timeouts.heartbeat_timeout_seconds,
                                       [this](int rank, const Status& st) { FailFromStartupWatch(rank, st); });
  }
  Status st = RunJob();
  StopStartupWatch();  // a failure before the dispatch: the caller tells the workers
  return st;
}

Status Coordinator::RunJob() {
  const auto start = start_;
  const int world = session_.world_size();
  const int32_t num_workers = world == 1 ? 1 : world - 1;
  if (world > 1 && spec_.resources.workers != num_workers) {
    log_.Warn(StrCat("resources.workers = ", spec_.resources.workers, " but mpirun started ", num_workers,
                     " worker ranks (plus the coordinator); running with ", num_workers));
  } else if (world == 1 && spec_.resources.workers > 1) {
    log_.Info(StrCat("running embedded (one process); for ", spec_.resources.workers,
                     " workers use: mpirun --enable-recovery -np ", spec_.resources.workers + 1, " tessel run ..."));
  }
  SetPhase("planning (importing, generating or partitioning the data)");
  TESSEL_RETURN_IF_ERROR(jobs::ValidateDataPaths(spec_));
  TESSEL_ASSIGN_OR_RETURN(std::unique_ptr<Planner> planner, MakePlanner(spec_));
  TESSEL_ASSIGN_OR_RETURN(Plan plan, planner->MakePlan(spec_, num_workers, log_));
  for (const std::string& note : plan.notes) log_.Info(note);
  // A --resume finds its checkpoint before anything is written (a refusal leaves nothing behind); then the
  // run directory is claimed (RUN_DIR/.tessel-run.lock) and the checkpoint directory taken.
  SetPhase("preparing the run directory");
  std::unique_lock<std::mutex> outputs(outputs_mu_);  // until the metrics are up: see FailFromStartupWatch
  if (resume_) {
    TESSEL_ASSIGN_OR_RETURN(run_dir_, ResumeRunDir(spec_));
    TESSEL_RETURN_IF_ERROR(FindCheckpoints(num_workers));
  }
  TESSEL_ASSIGN_OR_RETURN(run_dir_claim_, RunDirClaim::Take(run_dir_, spec_, run_dir_use_, session_.hostname(), log_));
  run_dir_ = run_dir_claim_->dir();
  if (!resume_) TESSEL_RETURN_IF_ERROR(FindCheckpoints(num_workers));
  TESSEL_RETURN_IF_ERROR(TakeRunDir(plan.step_unit));
  step_unit_ = plan.step_unit;
  if (Status st = StartMetrics(world == 1 ? "embedded" : "coordinator"); !st.ok()) {
    DiscardUnusedRunDir();
    return st;
  }
  planner->Publish(plan, *metrics_);
  outputs.unlock();

  Record result;
  if (Status st = world == 1 ? RunEmbedded(plan, &result) : RunDistributed(plan, &result); !st.ok()) {
    if (st.code() == Code::kBadLoss) st = BadLossError("rank 0 (embedded)", st.message());
    failed_rank_ = 0;
    Fail(st);
    return st;
  }
  const double wall = Seconds(Clock::now() - start).count();
  Record summary;
  Set(summary, "job", spec_.job.name);
  Set(summary, "kind", std::string(NameOf(spec_.job.kind)));
  Set(summary, "workers", static_cast<int64_t>(num_workers));
  Set(summary, "seed", static_cast<int64_t>(spec_.job.seed));
  Set(summary, "wall_seconds", wall);
  Merge(summary, plan.summary);
  Merge(summary, result);
  Set(summary, "outcome", Find(result, "stopped_by") != nullptr ? "stopped" : "done");
  Set(summary, "version", kTesselVersion);
  metrics_->SetJobState(Find(result, "stopped_by") != nullptr ? "stopped" : "done");
  TESSEL_RETURN_IF_ERROR(WriteSummary(run_dir_, summary));
  // The ranks' exporters go away with the job: without the targets file Prometheus stops scraping them and
  // does not alert. (A failed job keeps it, so that TesselRankDown tells the operator.)
  if (spec_.metrics.port_base > 0) {
    std::error_code ec;
    std::filesystem::remove(TargetsPath(), ec);
  }
  char line[64];
  std::snprintf(line, sizeof line, "%.1f s", wall);
  std::printf("summary: %s/summary.json\n", run_dir_.c_str());
  std::fflush(stdout);
  // Stopped by a signal: the state is saved (the workers wrote the checkpoint); exit 7.
  if (const RecordValue* by = Find(result, "stopped_by"); by != nullptr) {
    const std::string unit = plan.step_unit;
    const double after = FindNumber(result, "stopped_after_" + unit).value_or(0);
    return Status(Code::kStopped,
                  StrCat("stopped by ", StopCause(std::get<std::string>(by->data)), " after ", unit, " ",
                         static_cast<int64_t>(after), " of ", plan.num_steps, "; ",
                         spec_.checkpoint.every_steps > 0
                             ? StrCat("checkpoint in ", checkpoint_dir_, ": continue with tessel run --resume")
                             : std::string("checkpoints are off (checkpoint.every_steps = 0): nothing to resume"),
                         "; summary in ", run_dir_, "/summary.json"));
  }
  log_.Info(StrCat("final: ", FormatScalars(result), "; ", line));
  return Status();
}

Status Coordinator::RunEmbedded(Plan& plan, Record* result) {
  if (exporter_) {
    TESSEL_RETURN_IF_ERROR(WriteTargets(
        {monitoring::Target{TargetHost(spec_.metrics.bind, session_.hostname()), exporter_->port(), 0, "embedded"}}));
  }
  metrics_->SetJobState("training");
  workers::LocalComm comm;
  ProgressPrinter progress(plan.step_unit, plan.num_steps, spec_.train.log_every, log_);
  workers::RunHooks hooks;
  hooks.metrics = metrics_.get();
  hooks.run_dir = run_dir_;
  // One process: no coordinator rank watches the training thread, so a thread of this one does.
  StepWatchdog watchdog(spec_.timeouts.step_seconds, spec_.timeouts.startup_seconds,
                        StrCat("rank 0 (embedded, on ", session_.hostname(), ", pid ", getpid(), ")"),
                        [this](const Status& st) {
                          failed_rank_ = 0;
                          Fail(st);
                          AbortJob(st, status_file_);
                        });
  hooks.on_step = [&](const ProgressMsg& p) {
    watchdog.Stepped(p.step);
    RaiseStopAtTimeLimit();  // the worker loop, next, agrees on it and saves state
    steps_done_ = std::max(steps_done_, p.step);
    RecordStep(0, p);
    progress.Step(p);
  };
  hooks.on_checkpoint = [&](const workers::CheckpointMsg& m) { return Commit(m); };
  hooks.predicted_memory_bytes = plan.workers[0].predicted_memory_bytes;
  TESSEL_ASSIGN_OR_RETURN(*result,
                          workers::RunAssignment(Settings(), std::move(plan.workers[0].payload), comm, hooks, log_));
  return Status();
}

Status Coordinator::RunDistributed(Plan& plan, Record* result) {
  // Once workers run, no failure may return quietly: they would wait for work that never comes.
  Status st = DispatchAndWatch(plan, result);
  if (!st.ok()) {
    Fail(st);
    AbortJob(st, status_file_);
  }
  return st;
}

void Coordinator::DiscardUnusedRunDir() {
  if (steps_done_ > 0) return;
  namespace fs = std::filesystem;
  std::error_code ec;
  // Only what this run added (its claim of checkpoint.dir included), and the directory it created.
  for (const std::string& path : added_files_) fs::remove(path, ec);
  if (!created_checkpoint_dir_.empty()) ::rmdir(created_checkpoint_dir_.c_str());  // only when empty
  if (replaced_job_toml_) {
    if (Status st = WriteFileAtomically(run_dir_ + "/job.toml", *replaced_job_toml_); !st.ok()) log_.Warn(st.message());
  }
  if (!run_dir_created_ || !fs::exists(run_dir_, ec)) return;
  for (const auto& e : fs::directory_iterator(run_dir_, ec)) {
    const std::string name = e.path().filename().string();
    // What the run writes before its first step (the workers' checkpoint directory, still empty,
    // included); anything else keeps the directory.
    const bool empty_checkpoints = name == "checkpoints" && fs::is_empty(e.path(), ec) && !ec;
    if (name != "job.toml" && name != "targets.json" && name != "metrics.csv" && name != kRunLockName &&
        !empty_checkpoints) {
      return;
    }
  }
  if (ec) return;
  run_dir_claim_->Release();
  fs::remove_all(run_dir_, ec);
  if (!ec) log_.Info(StrCat("removed ", run_dir_, ": the job stopped before its first step"));
}

Status Coordinator::DispatchAndWatch(Plan& plan, Record* result) {
  const int world = session_.world_size();
  const workers::WorkerSettings settings = Settings();
  SetPhase("dispatching the assignments");
  for (int r = 1; r < world; ++r) {
    workers::AssignMsg a;
    a.settings = settings;
    a.run_dir = run_dir_;
    a.predicted_memory_bytes = plan.workers[static_cast<size_t>(r - 1)].predicted_memory_bytes;
    std::unique_ptr<workers::AssignmentPayload> payload = std::move(plan.workers[static_cast<size_t>(r - 1)].payload);
    a.kind = std::string(payload->kind());
    {
      ByteWriter w;
      payload->Encode(w);
      a.payload = w.Take();
    }
    payload.reset();  // sent as bytes: the decoded share is no longer needed here
    Status sent =
        workers::SendBytes(workers::Encode(a), r, workers::kTagAssign, Seconds(spec_.timeouts.startup_seconds));
    if (!sent.ok()) {
      // Named from what the start-up watch heard (Open MPI only says the send timed out).
      const std::string who = startup_watch_ ? startup_watch_->Describe(r) : StrCat("rank ", r, " (worker)");
      StopStartupWatch();  // before anything it reads is touched
      failed_rank_ = r;
      return RankFailedError(StrCat(who, " did not take its assignment: ", sent.message()));
    }
  }
  // From here this loop reads every message: it takes over what the start-up watch saw of each worker.
  const std::vector<StartupWatch::Sighting> seen = StopStartupWatch();
  log_.Info(StrCat("dispatched ", world - 1, " assignments; training ", plan.num_steps, " ", plan.step_unit, "s"));
  metrics_->SetJobState("training");
  std::vector<int32_t> worker_ranks;
  for (int r = 1; r < world; ++r) worker_ranks.push_back(r);
  monitoring::StragglerTracker stragglers(worker_ranks, spec_.metrics.straggler_factor, spec_.metrics.straggler_window);
  std::set<int32_t> straggling;  // the ranks the last window named
  auto last_ages = Clock::now();
  InstallStopHandlers();  // a SIGTERM, SIGINT or SIGUSR1 here is passed on to every worker
  bool stop_passed_on = false;

  std::map<int, WorkerState> state = InitialWorkerStates(world, Clock::now(), seen);
  ProgressPrinter progress(plan.step_unit, plan.num_steps, spec_.train.log_every, log_);
  const WorkerLimits limits{Seconds(spec_.timeouts.heartbeat_timeout_seconds), Seconds(spec_.timeouts.startup_seconds),
                            Seconds(spec_.timeouts.step_seconds)};
  const Seconds heartbeat_timeout = limits.heartbeat;
  int done = 0, hellos = 0;
  bool have_result = false;
  int64_t peak_rss = 0;
  std::vector<double> worker_rss(static_cast<size_t>(world - 1), 0);  // by worker: each one's own peak
  int64_t sleep_us = 100;
  auto last_turn = Clock::now();
  while (done < world - 1) {
    RaiseStopAtTimeLimit();
    if (const int sig = StopSignal(); sig != 0 && !stop_passed_on) {
      stop_passed_on = true;
      log_.Warn(StrCat(StopCause(sig), ": the workers stop after their current ", plan.step_unit, ", state saved"));
      for (int r = 1; r < world; ++r) {
        // Bounded: a rank that cannot take it is the watchdog's to judge.
        (void)workers::SendBytes(workers::Encode(workers::StopMsg{sig}), r, workers::kTagStop, std::chrono::seconds(5));
      }
    }
    TESSEL_ASSIGN_OR_RETURN(workers::Message m, workers::TryReceive(MPI_ANY_SOURCE, MPI_ANY_TAG));
    const auto now = Clock::now();
    // This coordinator's own stall does not count towards the workers' timeouts (ForgiveOwnStall). Their
    // messages queued meanwhile are read next; a worker that presumed this coordinator dead in the
    // meantime has said so in one of them.
    if (const Seconds gap = ForgiveOwnStall(state, last_turn, now); gap > Seconds(0)) {
      if (gap > heartbeat_timeout) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.1f", gap.count());
        log_.Warn(StrCat("this coordinator did not run for ", buf,
                         " s, longer than timeouts.heartbeat_timeout_seconds = ", heartbeat_timeout.count(),
                         " (it was stopped, or its host froze): the workers may have "
                         "presumed it dead"));
      }
    }
    last_turn = now;
    if (m.source >= 0) {
      sleep_us = 100;
      WorkerState& w = state[m.source];
      w.last_seen = now;
      // A worker answers the coordinator's beats from its start-up on, and a coordinator without
      // MPI_THREAD_MULTIPLE sends none: then only its heartbeats and its ready hello count.
      if (m.tag != workers::kTagStartup || session_.thread_multiple()) w.heard = true;
      switch (m.tag) {
        case workers::kTagStartup: {
          workers::HelloMsg early;
          TESSEL_RETURN_IF_ERROR(workers::Decode(m.bytes, &early));
          if (!w.hello) w.info = std::move(early);
          break;
        }
        case workers::kTagHello: {
          TESSEL_RETURN_IF_ERROR(workers::Decode(m.bytes, &w.info));
          w.hello = true;
          if (++hellos == world - 1) {
            std::vector<monitoring::Target> targets;
            const std::string& bind = spec_.metrics.bind;
            if (exporter_)
              targets.push_back({TargetHost(bind, session_.hostname()), exporter_->port(), 0, "coordinator"});
            for (const auto& [r, s] : state) {
              if (s.info.metrics_port > 0)
                targets.push_back({TargetHost(bind, s.info.host), s.info.metrics_port, r, "worker"});
            }
            if (Status written = WriteTargets(targets); !written.ok()) {
              return Status(written.code(), StrCat("metrics.targets_file: ", written.message()));
            }
            metrics_->Set("tessel_workers_alive", hellos);
          }
          break;
        }
        case workers::kTagHeartbeat: {
          workers::HeartbeatMsg hb;
          TESSEL_RETURN_IF_ERROR(workers::Decode(m.bytes, &hb));
          if (hb.step != w.step) w.last_step_change = now;
          w.step = hb.step;
          w.activity = std::move(hb.activity);
          steps_done_ = std::max(steps_done_, hb.step);
          break;
        }
        case workers::kTagProgress: {
          ProgressMsg p;
          TESSEL_RETURN_IF_ERROR(workers::Decode(m.bytes, &p));
          if (p.step != w.step) w.last_step_change = now;
          w.step = p.step;
          steps_done_ = std::max(steps_done_, p.step);
          RecordStep(m.source, p);
          stragglers.Add(m.source, FindNumber(p.figures, "compute_seconds").value_or(p.seconds));
          for (monitoring::StragglerTracker::Window win; stragglers.TakeWindow(&win);) {
            std::set<int32_t> now_straggling;
            for (const auto& sc : win.scores) {
              const std::string rank = std::to_string(sc.worker_rank);
              metrics_->Set("tessel_straggler_score", sc.vs_fastest, {rank, "vs_fastest"});
              metrics_->Set("tessel_straggler_score", sc.vs_own_median, {rank, "vs_own_median"});
              if (!sc.straggler) continue;
              now_straggling.insert(sc.worker_rank);
              if (straggling.contains(sc.worker_rank)) continue;
              char line[320];
              std::snprintf(line, sizeof line,
                            "straggler: rank %d (worker on %s) computes %.2fx slower than the fastest, rank %d, over "
                            "%ss %lld..%lld (median %.1f ms against %.1f ms; metrics.straggler_factor = %.2f)",
                            sc.worker_rank, state[sc.worker_rank].info.host.c_str(), sc.vs_fastest, win.fastest_rank,
                            plan.step_unit.c_str(), static_cast<long long>(win.first), static_cast<long long>(win.last),
                            sc.median_seconds * 1e3, sc.median_seconds / sc.vs_fastest * 1e3,
                            spec_.metrics.straggler_factor);
              log_.Warn(line);
            }
            straggling = std::move(now_straggling);
          }
          if (m.source != 1) break;  // the first worker speaks for the job
          progress.Step(p);
          metrics_->Set("tessel_loss", p.loss);
          metrics_->Set("tessel_epoch", static_cast<double>(p.step));
          metrics_->ObserveStep(p.seconds);
          break;
        }
        case workers::kTagResult: {
          workers::ResultMsg r;
          TESSEL_RETURN_IF_ERROR(workers::Decode(m.bytes, &r));
          // Every worker reports the same summed figures, but a worker's own (its feature rows, its halo
          // bytes) are its own: keep worker 0's (rank 1), whichever arrives first, each one's memory peak, and
          // the largest.
          const double rss = FindNumber(r.values, "peak_worker_rss_bytes").value_or(0);
          peak_rss = std::max<int64_t>(peak_rss, static_cast<int64_t>(rss));
          if (m.source >= 1 && m.source < world) worker_rss[static_cast<size_t>(m.source - 1)] = rss;
          if (!have_result || m.source == 1) *result = std::move(r.values), have_result = true;
          w.done = true;
          ++done;
          break;
        }
        case workers::kTagCheckpoint: {
          workers::CheckpointMsg c;
          TESSEL_RETURN_IF_ERROR(workers::Decode(m.bytes, &c));
          TESSEL_RETURN_IF_ERROR(Commit(c));
          break;
        }
        case workers::kTagError: {
          workers::ErrorMsg e;
          TESSEL_RETURN_IF_ERROR(workers::Decode(m.bytes, &e));
          const Code code = e.code >= 1 && e.code <= static_cast<int32_t>(Code::kBadLoss) ? static_cast<Code>(e.code)
                                                                                          : Code::kInternal;
          failed_rank_ = m.source;
          const std::string who =
              w.hello ? StrCat("rank ", m.source, " (worker on ", w.info.host, ")") : StrCat("rank ", m.source);
          // A bad loss names its own step; any other failure happened after the worker's last finished step.
          if (code == Code::kBadLoss) return BadLossError(who, e.message);
          if (e.step == 0) return Status(code, StrCat(who, " failed before training: ", e.message));
          return Status(code, StrCat(who, " failed after ", plan.step_unit, " ", e.step, ": ", e.message));
        }
        default:
          log_.Warn(StrCat("ignoring a message with tag ", m.tag, " from rank ", m.source));
      }
      continue;
    }
    if (now - last_ages > std::chrono::seconds(1)) {
      last_ages = now;
      for (const auto& [r, s] : state) {
        if (!s.done)
          metrics_->Set("tessel_heartbeat_age_seconds", Seconds(now - s.last_seen).count(), {std::to_string(r)});
      }
      metrics_->Set("tessel_resident_memory_bytes", static_cast<double>(ResidentBytes()));
    }
    if (Status silent = FindSilentWorker(state, now, limits, &failed_rank_); !silent.ok()) {
      metrics_->Set("tessel_workers_alive", hellos - 1);
      return silent;
    }
    TESSEL_RETURN_IF_ERROR(FindHungWorker(state, now, limits, &failed_rank_));
    std::this_thread::sleep_for(std::chrono::microseconds(sleep_us));
    sleep_us = std::min<int64_t>(sleep_us * 2, 20000);
  }
  // Every result is in: tell the workers the job ended, so that they go on to MPI_Finalize with this rank.
  ShutdownWorkers(session_);
  workers_released_ = true;
  Set(*result, "peak_worker_rss_bytes", peak_rss);
  Set(*result, "worker_peak_rss_bytes", std::move(worker_rss));
  Set(*result, "coordinator_peak_rss_bytes", PeakResidentBytes());
  // Where each rank ran (rank 0 is this coordinator): a multi-host run can be told from a one-host one.
  Record hosts;
  Set(hosts, "0", session_.hostname());
  for (const auto& [r, s] : state) Set(hosts, std::to_string(r), s.info.host);
  Set(*result, "rank_hosts", std::move(hosts));
  Set(*result, "stragglers", stragglers.Summary());
  return Status();
}

}  // namespace

namespace {

// Sets *workers_told once the workers have had their last word (the job ended, or it failed before they
// ran); failures while they run abort inside.
Status Coordinate(const RunRequest& request, workers::MpiSession& session, bool* workers_told) {
  TESSEL_ASSIGN_OR_RETURN(jobs::JobSpec spec, jobs::LoadJobFile(request.job_path, request.overrides));
  Logger log("coordinator", spec.job.log_level);
  std::unique_ptr<AliveBeats> beats;
  if (session.world_size() > 1 && session.thread_multiple()) {
    beats = std::make_unique<AliveBeats>(session.world_size(), spec.timeouts.heartbeat_interval_seconds,
                                         spec.timeouts.heartbeat_timeout_seconds, request.status_file);
  }
  Coordinator c(session, spec, request, log);
  Status st = c.Run();
  // A failure before the workers ran (they wait for their assignment): tell them while the beats go on,
  // so that none reads the silence after the beats as the coordinator's death.
  if (!st.ok() && !c.workers_released()) ShutdownWorkers(session);
  *workers_told = true;
  return st;
}

}  // namespace

Status RunCoordinator(const RunRequest& request, workers::MpiSession& session) {
  WriteStatusFile(request.status_file, nullptr);
  bool workers_told = false;
  Status st = Coordinate(request, session, &workers_told);
  if (!st.ok() && !workers_told) ShutdownWorkers(session);  // the job file did not load
  WriteStatusFile(request.status_file, &st);
  return st;
}

}  // namespace tessel::orchestrator
