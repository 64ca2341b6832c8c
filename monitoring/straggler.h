// Names the straggler among the workers of a job. In a synchronous job every rank's step takes as long as the
// slowest rank's (the collectives wait for it), so step times cannot tell the ranks apart; compute times can:
// a step's wall time less the time the rank spent blocked on its peers (tessel_peer_wait_seconds_total).
//
// The coordinator feeds it each worker's compute time per step. Steps are cut into windows of `window` steps;
// once every worker has reported a window, each worker gets a score: its median compute time over the
// window against the fastest worker's median (vs_fastest, 1 for the fastest) and against its own median
// over every earlier step (vs_own_median, NaN in the first window). A worker whose vs_fastest reaches
// `factor` is a straggler for that window.
//
// Thread safety: one thread. Failure: none; reports from unknown ranks start a new row.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "core/record.h"

namespace tessel::monitoring {

class StragglerTracker {
 public:
  struct Score {
    int32_t worker_rank = 0;
    double median_seconds = 0;  // the worker's median compute time over the window
    double vs_fastest = 0;
    double vs_own_median = 0;  // NaN in the first window
    bool straggler = false;
  };
  struct Window {
    int64_t first = 0, last = 0;  // the window's steps, counted from the first step reported (1-based)
    int32_t fastest_rank = 0;
    std::vector<Score> scores;  // by rank
  };

  // `workers` ranks are expected (the window completes when each has reported it); factor > 1; window >= 1.
  StragglerTracker(std::vector<int32_t> worker_ranks, double factor, int32_t window);

  // One finished step of one worker, in step order for that worker.
  void Add(int32_t worker_rank, double compute_seconds);

  // The next window every worker has completed, once (false when none is complete yet).
  bool TakeWindow(Window* out);

  // For summary.json: {"factor", "window_steps", "windows", "ranks": {RANK: {"median_compute_seconds",
  // "vs_fastest_last", "vs_fastest_max", "straggler_windows"}}}.
  Record Summary() const;

 private:
  struct Row {
    std::vector<double> seconds;  // every compute time reported, in step order
    double last_vs_fastest = 0, max_vs_fastest = 0;
    int64_t straggler_windows = 0;
  };
  double factor_;
  int32_t window_;
  int64_t windows_taken_ = 0;
  std::map<int32_t, Row> rows_;
};

}  // namespace tessel::monitoring
