#include "orchestrator/startup_watch.h"

#include <mpi.h>

#include <cstdio>
#include <memory>

#include "workers/comm/mpi_comm.h"
#include "workers/protocol.h"

namespace tessel::orchestrator {

namespace {

using Seconds = std::chrono::duration<double>;

// Often enough that a report comes within the heartbeat timeout plus a tenth of a second; two MPI_Improbe
// calls a turn, so the thread costs nothing beside a plan.
constexpr std::chrono::milliseconds kTurn(50);

}  // namespace

StartupWatch::StartupWatch(int world, double heartbeat_timeout_seconds, std::function<void(int, const Status&)> on_dead)
    : heartbeat_timeout_seconds_(heartbeat_timeout_seconds),
      on_dead_(std::move(on_dead)),
      ranks_(static_cast<size_t>(world)),
      last_tick_(Clock::now()) {
  ticker_ = std::make_unique<Ticker>(kTurn, [this] { return Tick(); });
}

void StartupWatch::SetPhase(std::string phase) {
  std::lock_guard<std::mutex> lock(mu_);
  phase_ = std::move(phase);
}

std::string StartupWatch::Describe(int rank) const {
  std::lock_guard<std::mutex> lock(mu_);
  const Sighting& s = ranks_.at(static_cast<size_t>(rank));
  if (s.host.empty()) return StrCat("rank ", rank, " (worker; not heard from yet)");
  return StrCat("rank ", rank, " (worker on ", s.host, ", pid ", s.pid, ")");
}

std::vector<StartupWatch::Sighting> StartupWatch::Stop() {
  ticker_.reset();
  std::lock_guard<std::mutex> lock(mu_);
  return ranks_;
}

bool StartupWatch::Tick() {
  // Every hello and heartbeat that arrived; any other message (a worker's error, its ready hello) is the
  // coordinator's watch loop's to read.
  for (const int tag : {workers::kTagStartup, workers::kTagHeartbeat}) {
    for (;;) {
      Result<workers::Message> m = workers::TryReceive(MPI_ANY_SOURCE, tag);
      if (!m.ok() || m->source <= 0 || m->source >= static_cast<int>(ranks_.size())) break;
      std::lock_guard<std::mutex> lock(mu_);
      Sighting& s = ranks_[static_cast<size_t>(m->source)];
      s.heard = true;
      s.last_seen = Clock::now();
      workers::HelloMsg hello;
      if (tag == workers::kTagStartup && workers::Decode(m->bytes, &hello).ok()) {
        s.host = std::move(hello.host);
        s.pid = hello.pid;
      }
    }
  }
  std::unique_lock<std::mutex> lock(mu_);
  const auto now = Clock::now();
  // A long gap between turns is this process's own stall (stopped, or its host starved it): the workers'
  // silence during it is no evidence against them.
  if (const auto gap = now - last_tick_; gap > std::chrono::seconds(1)) {
    for (Sighting& s : ranks_) s.last_seen += gap;
  }
  last_tick_ = now;
  for (size_t r = 1; r < ranks_.size(); ++r) {
    const Sighting& s = ranks_[r];
    const double silent = Seconds(now - s.last_seen).count();
    if (!s.heard || silent <= heartbeat_timeout_seconds_) continue;
    // A worker that reported a failure waits for the verdict without beating: its report comes first.
    int pending = 0;
    MPI_Iprobe(static_cast<int>(r), workers::kTagError, MPI_COMM_WORLD, &pending, MPI_STATUS_IGNORE);
    if (pending) continue;
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%.1f", silent);
    const Status dead = RankFailedError(StrCat(
        "rank ", r, " (worker on ", s.host.empty() ? "?" : s.host, ", pid ", s.pid, ") sent no heartbeat for ", seconds,
        " s (limit ", heartbeat_timeout_seconds_, " s, timeouts.heartbeat_timeout_seconds) while the coordinator was ",
        phase_, ", before training: presumed dead or hung; aborting the job"));
    lock.unlock();
    on_dead_(static_cast<int>(r), dead);
    return false;
  }
  return true;
}

}  // namespace tessel::orchestrator
