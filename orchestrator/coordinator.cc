#include "orchestrator/coordinator.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <thread>

#include "core/json_writer.h"
#include "core/logging.h"
#include "core/version.h"
#include "jobs/spec.h"
#include "monitoring/exporter.h"
#include "monitoring/metrics.h"
#include "monitoring/targets.h"
#include "orchestrator/job_graph.h"
#include "orchestrator/job_plan.h"
#include "orchestrator/run_output.h"
#include "workers/comm/comm.h"
#include "workers/protocol.h"
#include "workers/worker.h"

namespace tessel::orchestrator {

namespace {

using Clock = std::chrono::steady_clock;
using Seconds = std::chrono::duration<double>;
using workers::ProgressMsg;

LogLevel ParseLevel(const std::string& s) {
  if (s == "debug") return LogLevel::kDebug;
  if (s == "warn") return LogLevel::kWarn;
  if (s == "error") return LogLevel::kError;
  return LogLevel::kInfo;
}

// Progress: a redrawn bar on a terminal, plain log lines otherwise.
class ProgressPrinter {
 public:
  ProgressPrinter(int32_t epochs, int32_t every, const Logger& log)
      : epochs_(epochs), every_(std::max(1, every)), log_(log), tty_(isatty(STDERR_FILENO) != 0) {}

  void Epoch(const ProgressMsg& p) {
    total_seconds_ += p.seconds;
    const double eta = total_seconds_ / static_cast<double>(p.epoch) * static_cast<double>(epochs_ - p.epoch);
    char line[200];
    if (tty_) {
      const int width = 24;
      const int filled = static_cast<int>(width * p.epoch / std::max(1, epochs_));
      std::string bar(static_cast<size_t>(filled), '#');
      bar.resize(static_cast<size_t>(width), '.');
      std::snprintf(line, sizeof line, "\r[%s] epoch %d/%d  loss %.4f  train acc %.3f  %.1f ms/epoch  ETA %.0f s ",
                    bar.c_str(), static_cast<int>(p.epoch), epochs_, p.loss, p.train_accuracy, p.seconds * 1e3, eta);
      std::fputs(line, stderr);
      if (p.epoch == epochs_) std::fputs("\n", stderr);
      std::fflush(stderr);
      return;
    }
    if (p.epoch % every_ != 0 && p.epoch != epochs_ && p.epoch != 1) return;
    std::snprintf(line, sizeof line, "epoch %d/%d loss %.6f train_acc %.4f (%.1f ms)", static_cast<int>(p.epoch),
                  epochs_, p.loss, p.train_accuracy, p.seconds * 1e3);
    log_.Info(line);
  }

 private:
  int32_t epochs_, every_;
  const Logger& log_;
  bool tty_;
  double total_seconds_ = 0;
};

// The job's outcome for launchers: `mpirun --enable-recovery` (Open MPI 4.1) exits 0 whatever the ranks
// do, so scripts/tessel-mpirun reads the exit code from here.
void WriteStatusFile(const std::string& path, const Status& status) {
  if (path.empty()) return;
  JsonWriter w(false);
  w.BeginObject().Field("exit_code", status.exit_code()).Field("error", status.message()).EndObject();
  (void)WriteFileAtomically(path, w.str() + "\n");
}

[[noreturn]] void AbortJob(const Status& status, const std::string& status_file) {
  std::fprintf(stderr, "tessel: error: %s\n", status.message().c_str());
  std::fflush(stderr);
  WriteStatusFile(status_file, status);
  // Under `mpirun --enable-recovery` MPI_Abort ends this rank only; a worker that reported an error
  // waits for this shutdown, so tell every rank before aborting (bounded: a dead rank cannot block it).
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  for (int r = 1; r < world; ++r) (void)workers::SendBytes({}, r, workers::kTagShutdown, std::chrono::milliseconds(200));
  MPI_Abort(MPI_COMM_WORLD, status.exit_code());
  std::_Exit(status.exit_code());  // MPI_Abort does not return; this only satisfies [[noreturn]]
}

void ShutdownWorkers(const workers::MpiSession& session) {
  for (int r = 1; r < session.world_size(); ++r) {
    (void)workers::SendBytes({}, r, workers::kTagShutdown, std::chrono::seconds(10));
  }
}

struct WorkerState {
  Clock::time_point last_seen;
  Clock::time_point last_step_change;  // a live heartbeat with a frozen step is a hang
  int64_t step = 0;
  bool hello = false;
  bool done = false;
  workers::HelloMsg info;
};

class Coordinator {
 public:
  Coordinator(workers::MpiSession& session, const jobs::JobSpec& spec, std::string job_text,
              const RunRequest& request, const Logger& log)
      : session_(session), spec_(spec), job_text_(std::move(job_text)), overrides_(request.overrides),
        status_file_(request.status_file), log_(log) {}

  Status Run();

 private:
  Status StartMetrics(const std::string& role);
  Status RunEmbedded(const JobPlan& plan, workers::ResultMsg* result);
  Status RunDistributed(const JobPlan& plan, workers::ResultMsg* result);
  Status DispatchAndWatch(const JobPlan& plan, workers::ResultMsg* result);
  Status WriteTargets(const std::vector<monitoring::Target>& targets);

  workers::MpiSession& session_;
  const jobs::JobSpec& spec_;
  std::string job_text_;
  std::vector<std::string> overrides_;
  std::string status_file_;
  const Logger& log_;
  std::string run_dir_;
  std::unique_ptr<monitoring::Metrics> metrics_;
  std::unique_ptr<monitoring::Exporter> exporter_;
};

Status Coordinator::StartMetrics(const std::string& role) {
  metrics_ = std::make_unique<monitoring::Metrics>(monitoring::RankLabels{spec_.job.name, 0, role}, kTesselVersion);
  if (spec_.metrics.port_base <= 0) return Status();
  auto started = monitoring::Exporter::Start(spec_.metrics.bind, spec_.metrics.port_base, *metrics_);
  if (!started.ok()) {
    log_.Warn("metrics disabled on this rank: " + started.status().message());
    return Status();
  }
  exporter_ = std::move(started).value();
  return Status();
}

Status Coordinator::WriteTargets(const std::vector<monitoring::Target>& targets) {
  if (spec_.metrics.port_base <= 0) return Status();
  const std::string path = spec_.metrics.targets_file.empty() ? run_dir_ + "/targets.json" : spec_.metrics.targets_file;
  Status st = monitoring::WriteTargetsFile(path, spec_.job.name, targets);
  if (!st.ok()) log_.Warn("could not write the Prometheus targets file: " + st.message());
  else if (!targets.empty()) log_.Info("Prometheus targets: " + path);
  return Status();
}

Status Coordinator::Run() {
  const auto start = Clock::now();
  const int world = session_.world_size();
  const int32_t num_workers = world == 1 ? 1 : world - 1;
  if (world > 1 && spec_.resources.workers != num_workers) {
    log_.Warn(StrCat("resources.workers = ", spec_.resources.workers, " but mpirun started ", num_workers,
                     " worker ranks (plus the coordinator); running with ", num_workers));
  } else if (world == 1 && spec_.resources.workers > 1) {
    log_.Info(StrCat("running embedded (one process); for ", spec_.resources.workers,
                     " workers use: mpirun --enable-recovery -np ", spec_.resources.workers + 1, " tessel run ..."));
  }
  TESSEL_RETURN_IF_ERROR(jobs::ValidateDataPaths(spec_));
  TESSEL_ASSIGN_OR_RETURN(storage::HeteroGraph graph, LoadJobGraph(spec_, log_));
  log_.Info(StrCat("graph ", graph.name, ": ", graph.num_nodes(), " nodes, ", graph.num_edges(), " edges, ",
                   graph.relations.size(), " relations, ", graph.num_classes, " classes"));
  TESSEL_ASSIGN_OR_RETURN(JobPlan plan, PlanJob(spec_, graph, num_workers));
  if (num_workers > 1) {
    std::string imb;
    for (size_t i = 0; i < plan.partition.constraint_names.size(); ++i) {
      char buf[64];
      std::snprintf(buf, sizeof buf, " %s %.3f", plan.partition.constraint_names[i].c_str(), plan.partition.imbalance[i]);
      imb += buf;
    }
    log_.Info(StrCat("partitioned with ", plan.partition.method, " into ", num_workers, " parts: edge cut ",
                     plan.partition.edge_cut, ", imbalance", imb));
  }
  TESSEL_ASSIGN_OR_RETURN(run_dir_, MakeRunDir(spec_));
  TESSEL_RETURN_IF_ERROR(WriteFileAtomically(run_dir_ + "/job.toml", jobs::FormatJobToml(spec_)));
  TESSEL_RETURN_IF_ERROR(StartMetrics(world == 1 ? "embedded" : "coordinator"));
  if (metrics_) metrics_->SetPartitionEdgeCut(plan.partition.edge_cut);

  workers::ResultMsg result;
  TESSEL_RETURN_IF_ERROR(world == 1 ? RunEmbedded(plan, &result) : RunDistributed(plan, &result));
  const double wall = Seconds(Clock::now() - start).count();
  TESSEL_RETURN_IF_ERROR(WriteSummary(run_dir_, spec_, graph, plan, result, wall));
  // The ranks' exporters go away with the job: an empty target list keeps Prometheus from alerting on them.
  TESSEL_RETURN_IF_ERROR(WriteTargets({}));
  char line[256];
  std::snprintf(line, sizeof line, "final: train accuracy %.4f, test accuracy %.4f (%lld/%lld), loss %.6f, %.1f s",
                result.train_accuracy, result.test_accuracy, static_cast<long long>(result.test_correct),
                static_cast<long long>(result.test_total), result.epoch_loss.empty() ? 0.0 : result.epoch_loss.back(), wall);
  log_.Info(line);
  std::printf("test accuracy: %.4f\nsummary: %s/summary.json\n", result.test_accuracy, run_dir_.c_str());
  return Status();
}

Status Coordinator::RunEmbedded(const JobPlan& plan, workers::ResultMsg* result) {
  if (exporter_) {
    TESSEL_RETURN_IF_ERROR(WriteTargets({monitoring::Target{session_.hostname(), exporter_->port(), 0, "embedded"}}));
  }
  workers::LocalComm comm;
  ProgressPrinter progress(spec_.train.epochs, spec_.train.log_every, log_);
  workers::RunHooks hooks;
  hooks.metrics = metrics_.get();
  hooks.on_epoch = [&](const ProgressMsg& p) { progress.Epoch(p); };
  TESSEL_ASSIGN_OR_RETURN(*result, workers::RunPartition(spec_, plan.parts[0], comm, hooks, log_));
  return Status();
}

Status Coordinator::RunDistributed(const JobPlan& plan, workers::ResultMsg* result) {
  // Once workers run, no failure may return quietly: they would wait for work that never comes.
  Status st = DispatchAndWatch(plan, result);
  if (!st.ok()) AbortJob(st, status_file_);
  return st;
}

Status Coordinator::DispatchAndWatch(const JobPlan& plan, workers::ResultMsg* result) {
  const int world = session_.world_size();
  // Dispatch. Workers parse the same job text, so they see exactly the coordinator's settings.
  for (int r = 1; r < world; ++r) {
    workers::AssignMsg a;
    a.job_text = job_text_;
    a.job_source = spec_.source_path;
    a.overrides = overrides_;
    a.run_dir = run_dir_;
    a.partition = storage::EncodePartition(plan.parts[static_cast<size_t>(r - 1)]);
    Status sent = workers::SendBytes(workers::Encode(a), r, workers::kTagAssign, Seconds(spec_.timeouts.startup_seconds));
    if (!sent.ok()) AbortJob(RankFailedError(StrCat("rank ", r, " (worker) did not take its assignment: ", sent.message())), status_file_);
  }
  log_.Info(StrCat("dispatched ", world - 1, " partitions; training ", spec_.train.epochs, " epochs"));

  std::map<int, WorkerState> state;
  const auto dispatched = Clock::now();
  for (int r = 1; r < world; ++r) state[r].last_seen = state[r].last_step_change = dispatched;
  const Seconds step_timeout(spec_.timeouts.step_seconds);
  ProgressPrinter progress(spec_.train.epochs, spec_.train.log_every, log_);
  const Seconds heartbeat_timeout(spec_.timeouts.heartbeat_timeout_seconds);
  const Seconds startup_timeout(spec_.timeouts.startup_seconds);
  const double time_limit = spec_.job.time_limit_seconds;
  int done = 0, hellos = 0;
  bool have_result = false;
  int64_t sleep_us = 100;
  while (done < world - 1) {
    TESSEL_ASSIGN_OR_RETURN(workers::Message m, workers::TryReceive(MPI_ANY_SOURCE, MPI_ANY_TAG));
    const auto now = Clock::now();
    if (m.source >= 0) {
      sleep_us = 100;
      WorkerState& w = state[m.source];
      w.last_seen = now;
      switch (m.tag) {
        case workers::kTagHello: {
          TESSEL_RETURN_IF_ERROR(workers::Decode(m.bytes, &w.info));
          w.hello = true;
          if (++hellos == world - 1) {
            std::vector<monitoring::Target> targets;
            if (exporter_) targets.push_back({session_.hostname(), exporter_->port(), 0, "coordinator"});
            for (const auto& [r, s] : state) {
              if (s.info.metrics_port > 0) targets.push_back({s.info.host, s.info.metrics_port, r, "worker"});
            }
            TESSEL_RETURN_IF_ERROR(WriteTargets(targets));
            if (metrics_) metrics_->SetWorkersAlive(hellos);
          }
          break;
        }
        case workers::kTagHeartbeat: {
          workers::HeartbeatMsg hb;
          TESSEL_RETURN_IF_ERROR(workers::Decode(m.bytes, &hb));
          if (hb.step != w.step) w.last_step_change = now;
          w.step = hb.step;
          break;
        }
        case workers::kTagProgress: {
          ProgressMsg p;
          TESSEL_RETURN_IF_ERROR(workers::Decode(m.bytes, &p));
          if (p.epoch != w.step) w.last_step_change = now;
          w.step = p.epoch;
          progress.Epoch(p);
          if (metrics_) {
            metrics_->SetLoss(p.loss);
            metrics_->SetEpoch(p.epoch);
            metrics_->ObserveStep(p.seconds);
          }
          break;
        }
        case workers::kTagResult: {
          workers::ResultMsg r;
          TESSEL_RETURN_IF_ERROR(workers::Decode(m.bytes, &r));
          if (!have_result) *result = std::move(r), have_result = true;
          w.done = true;
          ++done;
          break;
        }
        case workers::kTagError: {
          workers::ErrorMsg e;
          TESSEL_RETURN_IF_ERROR(workers::Decode(m.bytes, &e));
          const Code code = e.code >= 1 && e.code <= 6 ? static_cast<Code>(e.code) : Code::kInternal;
          AbortJob(Status(code, StrCat("rank ", m.source, " (worker) failed at step ", e.step, ": ", e.message)), status_file_);
        }
        default:
          log_.Warn(StrCat("ignoring a message with tag ", m.tag, " from rank ", m.source));
      }
      continue;
    }
    for (const auto& [r, s] : state) {
      if (s.done) continue;
      const Seconds silent = now - s.last_seen;
      const Seconds limit = s.hello ? heartbeat_timeout : startup_timeout;
      if (silent > limit) {
        if (metrics_) metrics_->SetWorkersAlive(hellos - 1);
        char buf[64];
        std::snprintf(buf, sizeof buf, "%.1f", silent.count());
        AbortJob(RankFailedError(StrCat("rank ", r, " (worker on ", s.info.host.empty() ? "?" : s.info.host, ", pid ",
                                        s.info.pid, ") sent no heartbeat for ", buf, " s (limit ", limit.count(),
                                        " s); last step ", s.step, ": presumed dead or hung; aborting the job")),
                 status_file_);
      }
    }
    for (const auto& [r, s] : state) {
      if (s.done || !s.hello || now - s.last_step_change <= step_timeout) continue;
      AbortJob(RankFailedError(StrCat("rank ", r, " (worker on ", s.info.host, ", pid ", s.info.pid,
                                      ") is alive but has been at step ", s.step, " for more than ",
                                      step_timeout.count(), " s (timeouts.step_seconds): presumed hung; aborting the job")),
               status_file_);
    }
    if (time_limit > 0 && Seconds(now - dispatched).count() > time_limit) {
      AbortJob(RankFailedError(StrCat("job.time_limit_seconds = ", time_limit, " reached; aborting the job")), status_file_);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(sleep_us));
    sleep_us = std::min<int64_t>(sleep_us * 2, 20000);
  }
  return Status();
}

}  // namespace

namespace {

Status Coordinate(const RunRequest& request, workers::MpiSession& session) {
  std::string text;
  {
    std::ifstream in(request.job_path, std::ios::binary);
    if (!in) return UsageError("cannot read the job file " + request.job_path);
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  TESSEL_ASSIGN_OR_RETURN(jobs::JobSpec spec, jobs::ParseJob(text, request.job_path, request.overrides));
  Logger log("coordinator", ParseLevel(spec.job.log_level));
  Coordinator c(session, spec, std::move(text), request, log);
  return c.Run();
}

}  // namespace

Status RunCoordinator(const RunRequest& request, workers::MpiSession& session) {
  Status st = Coordinate(request, session);
  // Failures after dispatch abort inside; whatever returns here happened before any worker ran.
  if (!st.ok()) ShutdownWorkers(session);
  WriteStatusFile(request.status_file, st);
  return st;
}

}  // namespace tessel::orchestrator
