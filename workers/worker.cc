#include "workers/worker.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <mutex>

#include "core/activity.h"
#include "core/allocator.h"
#include "core/cuda_device.h"
#include "core/process_memory.h"
#include "core/safe_file.h"
#include "core/stop_signal.h"
#include "core/thread_pool.h"
#include "core/version.h"
#include "monitoring/exporter.h"
#include "storage/checkpoint_shard.h"
#include "workers/comm/nccl_comm.h"
#include "workers/comm/timed_comm.h"
#include "workers/coordinator_watch.h"
#include "workers/executor.h"
#include "workers/executor_registry.h"
#include "workers/host_limits.h"
#include "workers/loss_watch.h"
#include "workers/plugin_host/kernel_registry.h"
#include "workers/step_figures.h"
#include "workers/worker_checkpoint.h"

namespace tessel::workers {

namespace {

using Clock = std::chrono::steady_clock;
using Seconds = std::chrono::duration<double>;

// A failure that another worker has already reported (its own cause): this worker stops without a
// report of its own and waits for the coordinator, so the user sees the root cause, not its echo.
bool IsPeerFailure(const Status& st) { return st.code() == Code::kRankFailed && st.message().rfind("peer: ", 0) == 0; }

// Where this worker computes, decided once at start, together with every other worker: a job whose
// device is "cuda" is refused when any worker has no usable GPU, and "auto" uses the GPUs only when
// every worker has one (CPU and GPU workers cannot sum gradients together).
struct WorkerDevice {
  DeviceContext context;
  CudaStream stream;
  std::unique_ptr<DeviceComm> comm;
};

Result<std::unique_ptr<WorkerDevice>> OpenDevice(DeviceChoice request, WorkerComm& comm, const Logger& log) {
  auto device = std::make_unique<WorkerDevice>();
  const CudaProbe probe = request == DeviceChoice::kCpu ? CudaProbe{0, "not asked for", {}} : ProbeCuda();
  std::vector<int64_t> usable(static_cast<size_t>(comm.size()), 0);
  usable[static_cast<size_t>(comm.rank())] = probe.usable() ? 1 : 0;
  TESSEL_RETURN_IF_ERROR(comm.AllreduceSum(usable.data(), static_cast<int64_t>(usable.size())));
  std::vector<int> without;
  for (int w = 0; w < comm.size(); ++w) {
    if (usable[static_cast<size_t>(w)] == 0) without.push_back(w);
  }
  bool use_cuda = false;
  if (request == DeviceChoice::kCuda) {
    if (!probe.usable()) {
      return UsageError(StrCat("job.device = \"cuda\" but this worker has no usable GPU: ", probe.problem));
    }
    if (!without.empty()) {
      return RankFailedError(StrCat("peer: worker ", without.front(), " has no usable GPU; it reports why"));
    }
    use_cuda = true;
  } else if (request == DeviceChoice::kAuto) {
    use_cuda = without.empty();
    if (!use_cuda && probe.usable()) {
      log.Warn(StrCat("job.device = \"auto\": running on CPU, since ", without.size(), " of ", comm.size(),
                      " workers have no usable GPU"));
    }
  }
  if (!use_cuda) {
    device->comm = std::make_unique<HostDeviceComm>(comm);
    return device;
  }
  // One GPU per worker, by worker rank among the devices this process sees (ranks packed per node).
  device->context.device = Device::kCuda;
  device->context.ordinal = comm.rank() % probe.device_count;
  device->context.allocator = &CudaAllocator();
  TESSEL_RETURN_IF_ERROR(SelectCudaDevice(device->context.ordinal));
  TESSEL_ASSIGN_OR_RETURN(device->stream, CudaStream::Create());
  device->context.stream = device->stream.get();
  if (comm.size() == 1) {
    device->comm = std::make_unique<StagedDeviceComm>(comm, device->context.stream);
  } else if (HaveNccl()) {
    TESSEL_ASSIGN_OR_RETURN(device->comm, MakeNcclComm(comm, device->context.stream));
  } else {
    log.Warn("this build has no NCCL: GPU workers sum their gradients over MPI through host memory");
    device->comm = std::make_unique<StagedDeviceComm>(comm, device->context.stream);
  }
  return device;
}

// Whether any worker was asked to stop (core/stop_signal.h): after every step the workers sum, slot by
// slot, the signal each has seen, so that all of them stop after the same step (a checkpoint is every
// worker's shards of one step). One small allreduce a step.
struct StopAgreement {
  int signal = 0;  // the first asking rank's signal; 0: go on
  int rank = -1;   // which worker (its rank among the workers)
};
Result<StopAgreement> AgreeOnStop(WorkerComm& comm) {
  std::vector<int64_t> seen(static_cast<size_t>(comm.size()), 0);
  seen[static_cast<size_t>(comm.rank())] = StopSignal();
  TESSEL_RETURN_IF_ERROR(comm.AllreduceSum(seen.data(), static_cast<int64_t>(seen.size())));
  for (size_t r = 0; r < seen.size(); ++r) {
    if (seen[r] != 0) return StopAgreement{static_cast<int>(seen[r]), static_cast<int>(r)};
  }
  return StopAgreement{};
}

// RunAssignment, less the naming of an allocation failure's settings.
Result<Record> Train(const WorkerSettings& settings, std::unique_ptr<AssignmentPayload> payload,
                     const std::string& sized_by, WorkerComm& worker_comm, const RunHooks& hooks, const Logger& log) {
  // Every wait on a peer is counted: tessel_peer_wait_seconds_total, and the compute time of metrics.csv.
  TimedComm comm(worker_comm);
  TESSEL_RETURN_IF_ERROR(CheckCheckpointDir(settings, comm.rank()));
  InstallStopHandlers();         // from here a SIGTERM, SIGINT or SIGUSR1 stops after a step, state saved
  KernelRegistry registry(log);  // the job's log level: at debug, the plugin of every op
  registry.SetPreference(settings.plugin_prefer);
  TESSEL_RETURN_IF_ERROR(registry.LoadDefaults(settings.plugin_paths, settings.plugin_search_dirs));
  if (hooks.metrics != nullptr) {
    for (const ServedKernel& k : registry.Served()) {
      hooks.metrics->Set("tessel_plugin_info", 1,
                         {k.plugin, k.version, StrCat(k.abi_major, ".", k.abi_minor), k.op, DeviceName(k.device)});
    }
  }
  TESSEL_ASSIGN_OR_RETURN(std::unique_ptr<WorkerDevice> device, OpenDevice(settings.device, comm, log));
  TESSEL_ASSIGN_OR_RETURN(const ExecutorFactory* factory, FindExecutor(payload->kind()));
  log.Debug(payload->Describe());
  if (log.Enabled(LogLevel::kDebug)) log.Debug(StrCat(payload->kind(), " settings: ", payload->DescribeSettings()));

  TESSEL_RETURN_IF_ERROR(CheckThreads(settings.threads, comm.rank(), hooks.launch, log));
  TESSEL_RETURN_IF_ERROR(
      CheckMemory(hooks.predicted_memory_bytes, device->context.device, sized_by, comm.rank(), hooks.launch));
  Result<std::unique_ptr<ThreadPool>> started = ThreadPool::Create(settings.threads);
  if (!started.ok()) {
    return UsageError(StrCat("resources.threads_per_worker = ", settings.threads, ": worker ", comm.rank(), " ",
                             started.status().message(), " (lower it, or raise the host's limit: ulimit -u)"));
  }
  ThreadPool& pool = **started;
  MemoryBudget budget(settings.memory_budget_bytes);
  // Kernel times are only exported (not in metrics.csv): without an exporter nothing is timed.
  KernelTimer kernel_timer(hooks.metrics != nullptr && settings.metrics_port_base > 0 ? settings.kernel_sample_every
                                                                                      : 0);
  ExecutorContext context;
  context.comm = &comm;
  context.device_comm = device->comm.get();
  context.pool = &pool;
  context.kernels = &registry;
  context.device = device->context;
  context.budget = &budget;
  context.kernel_timer = &kernel_timer;
  context.metrics = hooks.metrics;
  context.log = &log;
  context.seed = settings.seed;
  context.run_dir = hooks.run_dir;
  context.step_timeout_seconds = settings.step_timeout_seconds;
  TESSEL_ASSIGN_OR_RETURN(std::unique_ptr<Executor> executor, factory->build(std::move(payload), context));

  const std::string unit(executor->step_unit());
  StepHistory history;
  int64_t first_step = 1;
  if (!settings.resume_step_dir.empty()) {
    if (settings.resume_step > executor->num_steps()) {
      return UsageError(StrCat("--resume: the checkpoint is at ", unit, " ", settings.resume_step,
                               " but the job has only ", executor->num_steps(), " ", unit, "s"));
    }
    const std::string shard = storage::CheckpointShardPath(settings.resume_step_dir, comm.rank());
    TESSEL_ASSIGN_OR_RETURN(std::vector<storage::NamedTensor> saved, storage::ReadCheckpointShard(shard));
    ShardState state(std::move(saved));
    // The shard read back whole and verified: what does not fit is the job, changed since (exit 2).
    const Status loaded = executor->LoadState(state);
    if (!loaded.ok()) {
      return UsageError(StrCat(shard, " does not fit this job: ", loaded.message(),
                               " (resume with the model, the pipeline split and the workers unchanged)"));
    }
    const Status restored = history.Load(state, settings.resume_step);
    if (!restored.ok()) return Status(restored.code(), StrCat(shard, ": ", restored.message()));
    first_step = settings.resume_step + 1;
    log.Info(StrCat("resumed from ", shard, " after ", unit, " ", settings.resume_step));
  }
  LossWatch loss_watch(settings.bad_loss_factor, settings.bad_loss_window);
  StepFigures figures(hooks.metrics);
  GpuSampler gpu(device->context, hooks.metrics, log);
  for (int64_t step = first_step; step <= executor->num_steps(); ++step) {
    const auto start = Clock::now();
    const TimedComm::Waits waited_before = comm.waits();
    const int64_t sent_before = comm.p2p_sent_bytes(), received_before = comm.p2p_received_bytes();
    kernel_timer.BeginStep(step);
    TESSEL_ASSIGN_OR_RETURN(StepResult r, executor->Step(step));
    const double took = Seconds(Clock::now() - start).count();
    TESSEL_ASSIGN_OR_RETURN(const std::vector<KernelTimer::Sum> kernel_sums, kernel_timer.EndStep());
    for (const KernelTimer::Sum& k : kernel_sums) {
      if (k.calls <= 0 || !(k.seconds >= 0)) continue;
      hooks.metrics->Add("tessel_kernel_seconds_total", k.seconds, {k.op, DeviceName(k.device)});
      hooks.metrics->Add("tessel_kernel_calls_total", static_cast<double>(k.calls), {k.op, DeviceName(k.device)});
    }
    if (hooks.metrics) hooks.metrics->Set("tessel_loss", r.loss);  // a bad one too: TesselLossNotFinite watches for it
    if (const std::string bad = loss_watch.Check(unit, step, r.loss); !bad.empty()) {
      if (hooks.metrics) hooks.metrics->Add("tessel_bad_loss_total", 1);
      // Every worker sees the same loss; the first reports it, the others stop quietly with it.
      const std::string hint = "lower train.lr, or set train.grad_clip";
      if (settings.on_bad_loss == BadLossAction::kStop) {
        if (comm.rank() != 0) return Status(Code::kRankFailed, "peer: " + bad);
        return Status(Code::kBadLoss, StrCat(bad, " (train.on_bad_loss = \"stop\"; ", hint, ")"));
      }
      if (comm.rank() == 0) log.Warn(StrCat(bad, " (train.on_bad_loss = \"warn\": training on)"));
    }
    history.Add(r, took);
    if (hooks.step) hooks.step->store(step);
    if (r.val_loss) Set(r.shown, "val_loss", *r.val_loss);  // shown last, in the progress line
    ProgressMsg progress{step, r.loss, took, std::move(r.shown), {}};
    TimedComm::Waits waited = comm.waits();
    for (size_t k = 0; k < waited.size(); ++k) waited[k] -= waited_before[k];
    progress.figures = figures.Take(r, took, waited, comm.p2p_sent_bytes() - sent_before,
                                    comm.p2p_received_bytes() - received_before, executor->Memory(), budget.peak());
    gpu.Sample(log);
    if (hooks.metrics) {
      hooks.metrics->ObserveStep(took);
      hooks.metrics->Set("tessel_epoch", static_cast<double>(step));
    }
    if (hooks.on_step) hooks.on_step(progress);
    const bool checkpointed = settings.checkpoint_every_steps > 0 && step % settings.checkpoint_every_steps == 0;
    if (checkpointed)
      TESSEL_RETURN_IF_ERROR(WriteCheckpoint(settings, *executor, history, step, comm, hooks.on_checkpoint, log));
    if (step == executor->num_steps()) break;  // the job is done: a stop request changes nothing now
    TESSEL_ASSIGN_OR_RETURN(const StopAgreement stop, AgreeOnStop(comm));
    if (stop.signal == 0) continue;
    // Every worker stops after this step, its state saved: the checkpoint (when checkpoints are on),
    // then the figures so far for summary.json, without the final evaluation.
    if (settings.checkpoint_every_steps > 0 && !checkpointed) {
      TESSEL_RETURN_IF_ERROR(WriteCheckpoint(settings, *executor, history, step, comm, hooks.on_checkpoint, log));
    }
    if (comm.rank() == 0) {
      log.Warn(StrCat(SignalName(stop.signal), " (seen first by worker ", stop.rank, "): every worker stopped after ",
                      unit, " ", step, " of ", executor->num_steps(),
                      settings.checkpoint_every_steps > 0 ? "; a checkpoint of it is written: continue with --resume"
                                                          : "; checkpoints are off (checkpoint.every_steps = 0)"));
    }
    Record out;
    history.Emit(unit, out);
    if (!settings.resume_step_dir.empty()) Set(out, "resumed_from_" + unit, settings.resume_step);
    Set(out, "stopped_by", SignalName(stop.signal));
    Set(out, "stopped_after_" + unit, step);
    Set(out, "device", std::string(DeviceName(device->context.device)));
    Set(out, "peak_worker_rss_bytes", PeakResidentBytes());
    return out;
  }
  TESSEL_ASSIGN_OR_RETURN(Record result, executor->Evaluate());
  Record out;
  history.Emit(unit, out);
  if (!settings.resume_step_dir.empty()) Set(out, "resumed_from_" + unit, settings.resume_step);
  Merge(out, result);
  Set(out, "device", std::string(DeviceName(device->context.device)));
  Set(out, "peak_worker_rss_bytes", PeakResidentBytes());
  if (device->context.device == Device::kCuda) Set(out, "peak_gpu_bytes", CudaPoolPeakBytes());
  return out;
}

}  // namespace

Result<Record> RunAssignment(const WorkerSettings& settings, std::unique_ptr<AssignmentPayload> payload,
                             WorkerComm& worker_comm, const RunHooks& hooks, const Logger& log) {
  const std::string sized_by = payload->SizedBy();
  Result<Record> out = Train(settings, std::move(payload), sized_by, worker_comm, hooks, log);
  if (out.ok() || !IsOutOfMemory(out.status()) || out.status().message().find(sized_by) != std::string::npos) {
    return out;
  }
  // An allocation that failed names its tensor; the assignment adds which settings sized it.
  return Status(out.status().code(), StrCat(out.status().message(), "; worker ", worker_comm.rank(),
                                            "'s tensors are sized by ", sized_by, ": lower them or add workers"));
}

namespace {

// Everything between receiving the assignment and the result; errors are reported by the caller.
Status ServeAssignment(MpiSession& session, MpiWorkerComm& comm, AssignMsg assign, std::atomic<int64_t>* step,
                       CoordinatorWatch& watch, const Logger& log) {
  const WorkerSettings& settings = assign.settings;
  // From the assignment on, the heartbeat thread speaks for this rank (until here its wait answered the
  // coordinator's beats): the coordinator, which has heard from it, judges its silence by the heartbeat
  // timeout, so a big payload's decoding must not go unannounced.
  std::unique_ptr<HeartbeatThread> heartbeat;
  const Seconds interval(settings.heartbeat_interval_seconds);
  if (session.thread_multiple()) {
    heartbeat = std::make_unique<HeartbeatThread>(step, interval, &watch, log);
  } else {
    log.Warn("MPI lacks MPI_THREAD_MULTIPLE: heartbeats are sent once per step");
  }
  TESSEL_ASSIGN_OR_RETURN(const ExecutorFactory* factory, FindExecutor(assign.kind));
  ByteReader reader(assign.payload.data(), assign.payload.size());
  std::unique_ptr<AssignmentPayload> payload = factory->decode(reader);
  if (!reader.ok() || payload == nullptr) {
    return BadDataError(StrCat("the ", assign.kind, " assignment is malformed: ", reader.error()));
  }
  std::vector<uint8_t>().swap(assign.payload);  // decoded: the bytes are no longer needed

  monitoring::Metrics metrics(monitoring::RankLabels{settings.job_name, session.world_rank(), "worker"},
                              kTesselVersion);
  std::unique_ptr<monitoring::Exporter> exporter;
  HelloMsg hello{session.hostname(), static_cast<int64_t>(getpid()), 0};
  if (settings.metrics_port_base > 0) {
    auto started =
        monitoring::Exporter::Start(settings.metrics_bind, settings.metrics_port_base + session.world_rank(), metrics);
    if (started.ok()) {
      exporter = std::move(started).value();
      hello.metrics_port = exporter->port();
    } else {
      // Before training: a rank that cannot serve its metrics stops the job (exit 2) rather than train unwatched.
      return UsageError(StrCat("metrics.port_base: rank ", session.world_rank(), " on ", session.hostname(),
                               " cannot serve its metrics on port ", settings.metrics_port_base + session.world_rank(),
                               ": ", started.status().message(),
                               " (choose a free metrics.port_base, or 0 to serve none)"));
    }
  }
  TESSEL_RETURN_IF_ERROR(SendBytes(Encode(hello), 0, kTagHello, Seconds(settings.startup_timeout_seconds)));

  RunHooks hooks;
  hooks.step = step;
  hooks.metrics = &metrics;
  hooks.run_dir = assign.run_dir;
  hooks.launch = Launch::kMpiWorker;
  hooks.predicted_memory_bytes = assign.predicted_memory_bytes;
  // Every worker reports each step: its row of metrics.csv, and its compute time for the straggler watch.
  hooks.on_step = [&](const ProgressMsg& p) {
    if (!heartbeat) (void)SendBytes(Encode(HeartbeatMsg{p.step, activity::Describe()}), 0, kTagHeartbeat, interval * 4);
    (void)SendBytes(Encode(p), 0, kTagProgress, interval * 4);
  };
  hooks.on_checkpoint = [&](const CheckpointMsg& m) {
    return SendBytes(Encode(m), 0, kTagCheckpoint, Seconds(settings.step_timeout_seconds));
  };
  Result<Record> result = RunAssignment(settings, std::move(payload), comm, hooks, log);
  if (heartbeat) heartbeat->Stop();
  TESSEL_RETURN_IF_ERROR(result.status());
  return SendBytes(Encode(ResultMsg{std::move(result).value()}), 0, kTagResult, Seconds(settings.step_timeout_seconds));
}

}  // namespace

Status RunMpiWorker(MpiSession& session, MpiWorkerComm& comm) {
  const Logger log(StrCat("rank ", session.world_rank()), LogLevel::kInfo);
  const Status aborted(Code::kRankFailed, "stopped; the coordinator has the cause");
  std::atomic<int64_t> step{0};
  CoordinatorWatch watch;
  auto first = AwaitAssignment(session, watch);
  if (!first.ok()) return first.status();
  if (first->tag == kTagShutdown) {
    // Empty: the coordinator stopped before dispatching (it reports why). {1}: it is aborting the job.
    return first->bytes.empty() ? Status() : aborted;
  }
  if (first->tag == kTagAbort) return aborted;  // it found another worker dead before dispatching (its {1} follows)
  Status st;
  AssignMsg assign;
  Seconds verdict_wait(0);
  if (first->tag != kTagAssign) {
    st = InternalError(StrCat("expected an assignment, got message tag ", first->tag));
  } else {
    st = Decode(first->bytes, &assign);
    std::vector<uint8_t>().swap(first->bytes);
    if (st.ok()) {
      // After this rank's result another rank may still be starting, training or evaluating; the
      // coordinator's watchdog ends the job within its startup, step and heartbeat timeouts.
      verdict_wait = Seconds(assign.settings.startup_timeout_seconds + 2 * assign.settings.step_timeout_seconds + 60);
      const Logger run_log(log.prefix(), assign.settings.log_level);
      st = ServeAssignment(session, comm, std::move(assign), &step, watch, run_log);
    }
  }
  if (st.ok()) {
    // The result is sent, but another rank can still fail the job. Finalize only once the coordinator says
    // the job ended; if it aborts instead, MPI_Finalize would wait for it forever. A coordinator that beats
    // is waited for as long as it lives (leaving without MPI_Finalize while it finalizes would hang it);
    // one that does not, up to its watchdog's limits.
    if (watch.heard()) verdict_wait = std::chrono::hours(24);
    auto verdict = AwaitCoordinator(watch, kTagShutdown, verdict_wait);
    if (!verdict.ok()) return verdict.status();
    if (verdict->source < 0) {
      return RankFailedError(
          StrCat("no word from the coordinator ", verdict_wait.count(), " s after this rank's result"));
    }
    return verdict->bytes.empty() ? Status() : aborted;
  }

  // A coordinator that already ended the job (another worker's report came first) has told every rank
  // to shut down before aborting: then there is nobody left to tell.
  if (auto pending = TryReceive(0, kTagShutdown); pending.ok() && pending->source >= 0) {
    log.Debug(StrCat("the job is already ending; not reporting: ", st.message()));
    return Status(st.code(), aborted.message());
  }
  if (IsPeerFailure(st)) {
    log.Debug(st.message());
  } else {
    // Tell the coordinator; it prints the error once and aborts the job with the right exit code.
    ErrorMsg err{st.exit_code(), step.load(), st.message()};
    if (!SendBytes(Encode(err), 0, kTagError, std::chrono::seconds(5)).ok()) return st;
  }
  // Wait (bounded) for the coordinator's shutdown rather than racing it to MPI_Finalize.
  auto reply = AwaitCoordinator(watch, kTagShutdown, std::chrono::seconds(60));
  if (!reply.ok()) return Status(st.code(), StrCat(reply.status().message(), "; this rank had failed: ", st.message()));
  return Status(st.code(), aborted.message());
}

}  // namespace tessel::workers
