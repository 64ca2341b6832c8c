#include "workers/worker.h"

#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "core/thread_pool.h"
#include "core/version.h"
#include "monitoring/exporter.h"
#include "workers/plugin_host/kernel_registry.h"
#include "workers/rgnn/rgcn_trainer.h"

namespace tessel::workers {

namespace {

using Clock = std::chrono::steady_clock;
using Seconds = std::chrono::duration<double>;

int64_t PeakRssBytes() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<int64_t>(ru.ru_maxrss) * 1024;
}

Result<RgcnInput> ChooseInput(const jobs::JobSpec& spec, const storage::WorkerPartition& part) {
  const std::string& in = spec.model.input;
  if (in == "onehot") return RgcnInput::kOneHot;
  if (in == "features") return RgcnInput::kFeatures;
  return part.feature_dim > 0 ? RgcnInput::kFeatures : RgcnInput::kOneHot;
}

// Sends a heartbeat to the coordinator every interval until stopped. Needs MPI_THREAD_MULTIPLE.
class HeartbeatThread {
 public:
  HeartbeatThread(std::atomic<int64_t>* step, Seconds interval) : step_(step), interval_(interval) {
    thread_ = std::thread([this] { Loop(); });
  }
  ~HeartbeatThread() { Stop(); }
  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      lock.unlock();
      // A failed heartbeat is not fatal here: the coordinator's timeout decides.
      (void)SendBytes(Encode(HeartbeatMsg{step_->load()}), 0, kTagHeartbeat, interval_ * 4);
      lock.lock();
      cv_.wait_for(lock, interval_, [this] { return stop_; });
    }
  }

  std::atomic<int64_t>* step_;
  Seconds interval_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace

Result<ResultMsg> RunPartition(const jobs::JobSpec& spec, const storage::WorkerPartition& part, WorkerComm& comm,
                               const RunHooks& hooks, const Logger& log) {
  KernelRegistry registry;
  TESSEL_RETURN_IF_ERROR(registry.LoadDefaults(spec.plugins.paths, spec.plugins.search_dirs));
  TESSEL_RETURN_IF_ERROR(registry.RequireOps(RgcnOps(), Device::kCpu));

  ThreadPool pool(spec.resources.threads_per_worker);
  RgcnConfig config;
  config.layers = spec.model.layers;
  config.hidden = spec.model.hidden;
  TESSEL_ASSIGN_OR_RETURN(config.input, ChooseInput(spec, part));
  config.lr = spec.train.lr;
  config.l2 = spec.train.l2;
  config.seed = spec.job.seed;
  TESSEL_ASSIGN_OR_RETURN(auto trainer, RgcnTrainer::Create(part, config, registry, comm, pool));
  log.Debug(StrCat("partition ", part.part, ": ", part.num_owned, " owned, ", part.num_rows() - part.num_owned,
                   " halo rows, ", part.src.size(), " edges, ", trainer->num_parameters(), " parameters"));

  ResultMsg result;
  int64_t halo_sent_seen = 0, halo_received_seen = 0;
  for (int32_t epoch = 1; epoch <= spec.train.epochs; ++epoch) {
    const auto start = Clock::now();
    TESSEL_ASSIGN_OR_RETURN(EpochStats stats, trainer->TrainEpoch());
    const double seconds = Seconds(Clock::now() - start).count();
    if (!std::isfinite(stats.loss)) {
      return BadDataError(StrCat("the loss became ", stats.loss, " at epoch ", epoch, ": lower train.lr?"));
    }
    result.epoch_loss.push_back(stats.loss);
    result.epoch_seconds.push_back(seconds);
    if (hooks.step) hooks.step->store(epoch);
    if (hooks.metrics) {
      hooks.metrics->ObserveStep(seconds);
      hooks.metrics->SetLoss(stats.loss);
      hooks.metrics->SetEpoch(epoch);
      const int64_t sent = trainer->halo_bytes_sent(), received = trainer->halo_bytes_received();
      hooks.metrics->AddHaloBytes(sent - halo_sent_seen, received - halo_received_seen);
      halo_sent_seen = sent;
      halo_received_seen = received;
    }
    if (hooks.on_epoch) hooks.on_epoch(ProgressMsg{epoch, stats.loss, stats.train_accuracy, seconds});
  }
  TESSEL_ASSIGN_OR_RETURN(EvalStats eval, trainer->Evaluate());
  result.train_accuracy = eval.train_accuracy;
  result.test_accuracy = eval.test_accuracy;
  result.test_correct = eval.test_correct;
  result.test_total = eval.test_total;
  result.peak_rss_bytes = PeakRssBytes();
  result.halo_bytes_sent = trainer->halo_bytes_sent();
  return result;
}

namespace {

// Everything between receiving the assignment and the result; errors are reported by the caller.
Status ServeAssignment(MpiSession& session, MpiWorkerComm& comm, const AssignMsg& assign, std::atomic<int64_t>* step,
                       const Logger& log) {
  TESSEL_ASSIGN_OR_RETURN(jobs::JobSpec spec, jobs::ParseJob(assign.job_text, assign.job_source, assign.overrides));
  TESSEL_ASSIGN_OR_RETURN(storage::WorkerPartition part,
                          storage::DecodePartition(assign.partition.data(), assign.partition.size()));

  monitoring::Metrics metrics(monitoring::RankLabels{spec.job.name, session.world_rank(), "worker"}, kTesselVersion);
  std::unique_ptr<monitoring::Exporter> exporter;
  HelloMsg hello{session.hostname(), static_cast<int64_t>(getpid()), 0};
  if (spec.metrics.port_base > 0) {
    auto started = monitoring::Exporter::Start(spec.metrics.bind, spec.metrics.port_base + session.world_rank(), metrics);
    if (started.ok()) {
      exporter = std::move(started).value();
      hello.metrics_port = exporter->port();
    } else {
      log.Warn("metrics disabled on this rank: " + started.status().message());
    }
  }
  TESSEL_RETURN_IF_ERROR(SendBytes(Encode(hello), 0, kTagHello, Seconds(spec.timeouts.startup_seconds)));

  std::unique_ptr<HeartbeatThread> heartbeat;
  const Seconds interval(spec.timeouts.heartbeat_interval_seconds);
  RunHooks hooks;
  hooks.step = step;
  hooks.metrics = &metrics;
  if (session.thread_multiple()) {
    heartbeat = std::make_unique<HeartbeatThread>(step, interval);
  } else {
    log.Warn("MPI lacks MPI_THREAD_MULTIPLE: heartbeats are sent once per epoch");
  }
  const bool reports_progress = comm.rank() == 0;
  hooks.on_epoch = [&](const ProgressMsg& p) {
    if (!heartbeat) (void)SendBytes(Encode(HeartbeatMsg{p.epoch}), 0, kTagHeartbeat, interval * 4);
    if (reports_progress) (void)SendBytes(Encode(p), 0, kTagProgress, interval * 4);
  };
  Result<ResultMsg> result = RunPartition(spec, part, comm, hooks, log);
  if (heartbeat) heartbeat->Stop();
  TESSEL_RETURN_IF_ERROR(result.status());
  return SendBytes(Encode(*result), 0, kTagResult, Seconds(spec.timeouts.step_seconds));
}

}  // namespace

int RunMpiWorker(MpiSession& session, MpiWorkerComm& comm) {
  const Logger log(StrCat("rank ", session.world_rank()), LogLevel::kInfo);
  std::atomic<int64_t> step{0};
  // The coordinator validates and partitions first; that can take a while on a big graph.
  auto first = PollMessage(0, MPI_ANY_TAG, std::chrono::hours(24));
  if (!first.ok()) {
    log.Error(first.status().ToString());
    return first.status().exit_code();
  }
  if (first->tag == kTagShutdown) return 0;
  Status st;
  AssignMsg assign;
  if (first->tag != kTagAssign) {
    st = InternalError(StrCat("expected an assignment, got message tag ", first->tag));
  } else {
    st = Decode(first->bytes, &assign);
    if (st.ok()) st = ServeAssignment(session, comm, assign, &step, log);
  }
  if (st.ok()) return 0;

  // Tell the coordinator; it prints the error once and aborts the job with the right exit code.
  ErrorMsg err{st.exit_code(), step.load(), st.message()};
  Status sent = SendBytes(Encode(err), 0, kTagError, std::chrono::seconds(30));
  if (!sent.ok()) {
    log.Error(st.ToString());
    return st.exit_code();
  }
  // Wait (bounded) for the coordinator's abort rather than racing it to MPI_Finalize.
  auto reply = PollMessage(0, kTagShutdown, std::chrono::seconds(60));
  (void)reply;
  return st.exit_code();
}

}  // namespace tessel::workers
