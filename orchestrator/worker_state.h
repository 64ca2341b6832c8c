// What the coordinator's watch loop knows of each worker rank, and its verdicts on them: a worker silent
// past its limit (the heartbeat timeout once it has been heard from, the startup limit until then), and one
// alive whose step has not moved for timeouts.step_seconds. Thread safety: values; one thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/status.h"
#include "orchestrator/startup_watch.h"
#include "workers/protocol.h"

namespace tessel::orchestrator {

struct WorkerState {
  using Clock = std::chrono::steady_clock;
  Clock::time_point last_seen;
  Clock::time_point last_step_change;  // a live heartbeat with a frozen step is a hang
  int64_t step = 0;
  bool hello = false;  // its ready hello (after the assignment, with its metrics port)
  bool heard = false;  // anything from it that a live worker keeps sending: judged by the heartbeat timeout
  bool done = false;
  workers::HelloMsg info;
  std::string activity;  // its last heartbeat's: what its compute was doing (core/activity.h)
};

// One state per worker rank 1..world-1, as of `dispatched`, with what the start-up watch saw of each (may be
// empty: none ran).
std::map<int, WorkerState> InitialWorkerStates(int world, WorkerState::Clock::time_point dispatched,
                                               const std::vector<StartupWatch::Sighting>& seen);

struct WorkerLimits {
  std::chrono::duration<double> heartbeat, startup, step;
};

// The coordinator's watch loop turns every few milliseconds; a gap longer than a second between its turns
// (`last_turn` to `now`) is its own stall (the process was stopped, its host froze or starved it). The
// workers' silence during it is no evidence against them: their last_seen and last_step_change move
// forward by the gap. Returns the gap (0 when under a second, and nothing moved).
std::chrono::duration<double> ForgiveOwnStall(std::map<int, WorkerState>& state,
                                              WorkerState::Clock::time_point last_turn,
                                              WorkerState::Clock::time_point now);

// The first worker (not done) silent past its limit at `now`: sets *rank and returns its kRankFailed report;
// OK when none is.
Status FindSilentWorker(const std::map<int, WorkerState>& state, WorkerState::Clock::time_point now,
                        const WorkerLimits& limits, int* rank);
// The first worker alive but stuck on one step for longer than limits.step: as FindSilentWorker.
Status FindHungWorker(const std::map<int, WorkerState>& state, WorkerState::Clock::time_point now,
                      const WorkerLimits& limits, int* rank);

}  // namespace tessel::orchestrator
