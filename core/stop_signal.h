// Stop requests: SIGTERM, SIGINT and SIGUSR1 (what Slurm's `--signal=USR1@60` and `scancel` send, and
// what mpirun forwards to every rank) ask a training run to stop after its current step with its state
// saved: a checkpoint when checkpoints are on, summary.json and the status file, then exit 7 (kStopped).
// A second SIGTERM or SIGINT ends the process at once (their default action), so an impatient Ctrl-C
// still works.
//
//   InstallStopHandlers();           // once training is about to start
//   ... after each step: if (StopSignal() != 0) { save; stop; }
//
// Thread safety: every function may be called from any thread; the handler only stores an atomic.
// Failure: none.
#pragma once

#include <signal.h>

#include <string>

namespace tessel {

// The stop request of a run's time limit (job.time_limit_seconds): the coordinator raises it when the
// limit passes, and it travels, stops the workers and is saved exactly as a signal's would be. No one
// sends SIGALRM; it only stands for the limit (SignalName: "job.time_limit_seconds").
inline constexpr int kTimeLimitStop = SIGALRM;

// Installs the handlers of SIGTERM, SIGINT and SIGUSR1 (idempotent).
void InstallStopHandlers();
// The signal the first stop request came with (SIGTERM, SIGINT or SIGUSR1), or 0.
int StopSignal();
// Records a stop request as if `signal` had arrived here (a coordinator passing one on to a worker). The
// first request wins.
void RequestStop(int signal);
// "SIGTERM", "SIGINT", "SIGUSR1", "job.time_limit_seconds" (kTimeLimitStop), else "signal N".
std::string SignalName(int signal);

}  // namespace tessel
