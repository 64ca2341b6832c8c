#include "orchestrator/liveness.h"

#include <mpi.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "core/activity.h"
#include "core/json.h"
#include "orchestrator/run_output.h"
#include "workers/protocol.h"

namespace tessel::orchestrator {

void WriteStatusFile(const std::string& path, const Status* status, double timeout_seconds, double interval_seconds) {
  if (path.empty()) return;
  static std::mutex mu;
  static bool outcome_written = false;
  std::lock_guard<std::mutex> lock(mu);
  if (outcome_written) return;
  Json doc = Json::object();
  doc["state"] = status == nullptr ? "running" : "done";
  char host[256] = {};
  (void)::gethostname(host, sizeof host - 1);
  doc["host"] = std::string(host);
  doc["pid"] = static_cast<int64_t>(::getpid());
  if (status != nullptr) {
    doc["exit_code"] = status->exit_code();
    doc["error"] = status->message();
    outcome_written = true;
  } else if (timeout_seconds > 0) {
    doc["timeout_seconds"] = timeout_seconds;
    if (interval_seconds > 0) doc["interval_seconds"] = interval_seconds;
  }
  // The status file is a live channel to the launcher (scripts/tessel-mpirun), not a record (summary.json
  // is): not fsynced. A beat is written by the beat thread every interval, right after the beats to the
  // workers, and under this mutex; an fsync made each wait for the disk (up to 0.39 s here beside a
  // 300 MB checkpoint write), and under load the coordinator once sent nothing for 5.8 s and was presumed
  // dead (netns_drills). The outcome, which the launcher acts on within a second, waited the same way.
  (void)WriteFileAtomically(path, FormatJson(doc, JsonLayout::kCompact) + "\n", 0644, Durability::kVolatile);
}

[[noreturn]] void AbortJob(const Status& status, const std::string& status_file) {
  std::fprintf(stderr, "tessel: error: %s\n", status.message().c_str());
  std::fflush(stderr);
  WriteStatusFile(status_file, &status);
  // Under `mpirun --enable-recovery` MPI_Abort ends this rank only; a worker that reported an error
  // waits for this shutdown, so tell every rank before aborting (bounded: a dead rank cannot block it).
  // The {1} says "aborting": a worker that gets it leaves without MPI_Finalize, which would wait for this
  // rank forever.
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  if (world == 1) std::_Exit(status.exit_code());  // embedded: no rank to tell, and no MPI_Abort banner
  static const std::vector<uint8_t> kAborting{1};  // outlives a cancelled send
  static const std::vector<uint8_t> kNothing;
  // First the notice a training rank's heartbeat thread takes (its training thread may be stuck in a
  // collective with a hung rank, where it would wait out its own timeout), then the one a waiting rank takes.
  for (int r = 1; r < world; ++r) {
    (void)workers::SendBytes(kNothing, r, workers::kTagAbort, std::chrono::milliseconds(200));
  }
  for (int r = 1; r < world; ++r) {
    (void)workers::SendBytes(kAborting, r, workers::kTagShutdown, std::chrono::milliseconds(200));
  }
  MPI_Abort(MPI_COMM_WORLD, status.exit_code());
  std::_Exit(status.exit_code());  // MPI_Abort does not return; this only satisfies [[noreturn]]
}

Ticker::Ticker(std::chrono::duration<double> period, std::function<bool()> tick) {
  thread_ = std::thread([this, period, tick = std::move(tick)] {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      lock.unlock();
      if (!tick()) return;
      lock.lock();
      cv_.wait_for(lock, period, [this] { return stop_; });
    }
  });
}

Ticker::~Ticker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

AliveBeats::AliveBeats(int world, double interval_seconds, double silence_limit_seconds, std::string status_file)
    : world_(world),
      interval_(interval_seconds),
      silence_limit_seconds_(silence_limit_seconds),
      status_file_(std::move(status_file)),
      beat_(*new std::vector<uint8_t>(workers::Encode(workers::AliveMsg{silence_limit_seconds}))),
      ticker_(interval_, [this] { return Beat(); }) {}

bool AliveBeats::Beat() {
  // A failed beat is not fatal: a dead worker is the heartbeat watchdog's to report. A beat is small and
  // goes out at once unless the rank has stopped taking messages, so a short limit keeps a dead rank from
  // delaying the others' beats.
  for (int r = 1; r < world_; ++r) (void)workers::SendBytes(beat_, r, workers::kTagAlive, interval_ / 4);
  WriteStatusFile(status_file_, nullptr, silence_limit_seconds_, interval_.count());
  return true;
}

void ShutdownWorkers(const workers::MpiSession& session) {
  for (int r = 1; r < session.world_size(); ++r) {
    (void)workers::SendBytes({}, r, workers::kTagShutdown, std::chrono::seconds(10));
  }
}

StepWatchdog::StepWatchdog(double step_seconds, double startup_seconds, std::string who,
                           std::function<void(const Status&)> on_hang)
    : step_seconds_(step_seconds),
      startup_seconds_(startup_seconds),
      who_(std::move(who)),
      on_hang_(std::move(on_hang)),
      since_(Clock::now()),
      ticker_(std::chrono::milliseconds(100), [this] { return Check(); }) {}

void StepWatchdog::Stepped(int64_t step, Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mu_);
  step_ = step;
  since_ = now;
}

Status StepWatchdog::Judge(Clock::time_point now) {
  std::unique_lock<std::mutex> lock(mu_);
  const double limit = step_seconds_ + (step_ == 0 ? startup_seconds_ : 0);
  if (std::chrono::duration<double>(now - since_).count() <= limit) return Status();
  const std::string doing = activity::Describe();
  return RankFailedError(
      StrCat(who_, " has not finished step ", step_ + 1, " within ", limit, " s (timeouts.step_seconds",
             step_ == 0 ? " + timeouts.startup_seconds, the first step loading its data" : "", ")",
             doing.empty() ? std::string() : StrCat("; its compute: ", doing), ": presumed hung; aborting the job"));
}

bool StepWatchdog::Check() {
  const Status hung = Judge(Clock::now());
  if (hung.ok()) return true;
  on_hang_(hung);  // ends the process
  return false;
}

}  // namespace tessel::orchestrator
