#include "orchestrator/worker_state.h"

#include <cstdio>

namespace tessel::orchestrator {

std::map<int, WorkerState> InitialWorkerStates(int world, WorkerState::Clock::time_point dispatched,
                                               const std::vector<StartupWatch::Sighting>& seen) {
  std::map<int, WorkerState> state;
  for (int r = 1; r < world; ++r) {
    WorkerState& w = state[r];
    w.last_seen = w.last_step_change = dispatched;
    if (static_cast<size_t>(r) >= seen.size() || !seen[static_cast<size_t>(r)].heard) continue;
    const StartupWatch::Sighting& s = seen[static_cast<size_t>(r)];
    w.heard = true;
    w.last_seen = s.last_seen;
    w.info.host = s.host;
    w.info.pid = s.pid;
  }
  return state;
}

std::chrono::duration<double> ForgiveOwnStall(std::map<int, WorkerState>& state,
                                              WorkerState::Clock::time_point last_turn,
                                              WorkerState::Clock::time_point now) {
  const std::chrono::duration<double> gap = now - last_turn;
  if (gap <= std::chrono::seconds(1)) return std::chrono::duration<double>(0);
  const auto shift = now - last_turn;
  for (auto& [r, s] : state) {
    s.last_seen += shift;
    s.last_step_change += shift;
  }
  return gap;
}

Status FindSilentWorker(const std::map<int, WorkerState>& state, WorkerState::Clock::time_point now,
                        const WorkerLimits& limits, int* rank) {
  for (const auto& [r, s] : state) {
    if (s.done) continue;
    const std::chrono::duration<double> silent = now - s.last_seen;
    const bool by_heartbeat = s.hello || s.heard;
    const double limit = (by_heartbeat ? limits.heartbeat : limits.startup).count();
    if (silent.count() <= limit) continue;
    *rank = r;
    if (!by_heartbeat && s.info.host.empty()) {
      return RankFailedError(StrCat("rank ", r,
                                    " (worker) has not been heard from since the job started: no hello "
                                    "within ",
                                    limit,
                                    " s of its assignment (timeouts.startup_seconds): presumed dead "
                                    "or hung; aborting the job"));
    }
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.1f", silent.count());
    return RankFailedError(StrCat("rank ", r, " (worker on ", s.info.host.empty() ? "?" : s.info.host, ", pid ",
                                  s.info.pid, ") sent no heartbeat for ", buf, " s (limit ", limit, " s, timeouts.",
                                  by_heartbeat ? "heartbeat_timeout_seconds" : "startup_seconds", "); last step ",
                                  s.step,
                                  s.activity.empty() ? std::string() : StrCat(" (its compute then: ", s.activity, ")"),
                                  ": presumed dead or hung; aborting the job"));
  }
  return Status();
}

Status FindHungWorker(const std::map<int, WorkerState>& state, WorkerState::Clock::time_point now,
                      const WorkerLimits& limits, int* rank) {
  for (const auto& [r, s] : state) {
    if (s.done || !s.hello || now - s.last_step_change <= limits.step) continue;
    *rank = r;
    return RankFailedError(StrCat("rank ", r, " (worker on ", s.info.host, ", pid ", s.info.pid,
                                  ") is alive but has not finished step ", s.step + 1, " within ", limits.step.count(),
                                  " s (timeouts.step_seconds)",
                                  s.activity.empty() ? std::string() : StrCat("; its compute: ", s.activity),
                                  ": presumed hung; aborting the job"));
  }
  return Status();
}

}  // namespace tessel::orchestrator
