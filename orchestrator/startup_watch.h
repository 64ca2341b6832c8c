// The coordinator's watch over its workers before training: while it imports, generates or partitions the
// graph, plans and dispatches (minutes on a big job), a thread takes each worker's start-up hello (host
// and pid, kTagStartup) and the heartbeats with which a waiting worker answers the coordinator's beats
// (workers/coordinator_watch.h), and reports a worker that has been heard and then falls silent for
// timeouts.heartbeat_timeout_seconds, by rank, host and pid, as the training watch does. Once the
// coordinator's own watch loop runs (DispatchAndWatch), it takes over what this one learned (Stop()).
//
// A worker never heard from is not judged here: the coordinator's startup limit (timeouts.startup_seconds,
// from the dispatch) still is. Needs MPI_THREAD_MULTIPLE (a thread that receives while the main thread
// plans or sends).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/status.h"
#include "orchestrator/liveness.h"

namespace tessel::orchestrator {

class StartupWatch {
 public:
  using Clock = std::chrono::steady_clock;

  // What the watch knows of one worker rank.
  struct Sighting {
    bool heard = false;  // it said hello or answered a beat: its silence is judged by the heartbeat timeout
    std::string host;    // from its hello ("" until then)
    int64_t pid = 0;
    Clock::time_point last_seen{};
  };

  // Watches world ranks 1..world-1. `on_dead` is called once, from the watch's thread, with the rank and a
  // kRankFailed status that names it (rank, host, pid, the silence and what the coordinator was doing); it
  // must end the process (AbortJob) or return only once the watch may stop.
  StartupWatch(int world, double heartbeat_timeout_seconds, std::function<void(int, const Status&)> on_dead);
  ~StartupWatch() = default;
  StartupWatch(const StartupWatch&) = delete;
  StartupWatch& operator=(const StartupWatch&) = delete;

  // What the coordinator does now, for the report: "planning", "dispatching the assignments". Any thread.
  void SetPhase(std::string phase);
  // "rank 2 (worker on HOST, pid 123)", or "rank 2 (worker; not heard from yet)". Any thread.
  std::string Describe(int rank) const;
  // Stops the thread (waits for it: never call it from `on_dead`, nor while holding a lock that `on_dead`
  // takes) and returns what it learned, indexed by world rank (entry 0 unused). Main thread, once.
  std::vector<Sighting> Stop();

 private:
  bool Tick();

  const double heartbeat_timeout_seconds_;
  const std::function<void(int, const Status&)> on_dead_;
  mutable std::mutex mu_;
  std::vector<Sighting> ranks_;
  std::string phase_ = "starting";
  Clock::time_point last_tick_;
  std::unique_ptr<Ticker> ticker_;  // last: stopped before the members it reads go
};

}  // namespace tessel::orchestrator
