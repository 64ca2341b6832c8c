// A worker rank's side of the liveness protocol with the coordinator (rank 0): the coordinator's beats
// (kTagAlive) that tell this rank it lives, this rank's own heartbeats (kTagHeartbeat) that tell the
// coordinator the same, and the wait for the coordinator's next word with both going on.
//
// From its first moment a worker is known to the coordinator: AwaitAssignment says hello (host and pid,
// kTagStartup) before the coordinator has planned, and answers each of its beats with a heartbeat while it
// waits. So a worker that dies while the coordinator imports, partitions or dispatches is reported within
// the heartbeat timeout, by rank, host and pid, as one that dies mid-training is (orchestrator/startup_watch.h).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

#include "core/logging.h"
#include "core/status.h"
#include "workers/comm/mpi_comm.h"

namespace tessel::workers {

// Whether the coordinator still lives, from its beats (kTagAlive, sent while it runs). Until the first
// beat it is presumed alive: a coordinator without MPI_THREAD_MULTIPLE never beats.
// Thread safety: one thread at a time (the main thread, or the heartbeat thread while it runs).
class CoordinatorWatch {
 public:
  using Seconds = std::chrono::duration<double>;

  using Clock = std::chrono::steady_clock;
  // Takes one beat that arrived at `now` (one that does not decode is ignored).
  void Heard(const Message& m, Clock::time_point now = Clock::now());
  // A stop request the coordinator passed on: this rank stops after the step all the workers agree on.
  static void TakeStop(const Message& m);
  // Whether the coordinator beats: then its death ends every wait, and none needs a limit of its own.
  bool heard() const { return heard_; }
  // How many beats it has taken.
  int64_t beats() const { return beats_; }
  // How long until the coordinator's silence passes the limit (at least 10 ms; `cap` until the first
  // beat): a wait bounded by it cannot hold back the verdict.
  Seconds UntilPresumedDead(Seconds cap, Clock::time_point now = Clock::now()) const;
  // Takes the beats that have arrived, then judges: kRankFailed once the coordinator has been silent for
  // longer than the limit its beats carry. The beats are taken first, so that this rank's own stall (a
  // loaded machine) does not read as the coordinator's silence.
  Status Check();
  // The verdict at `now` on the beats taken so far (Check's, without taking any).
  Status Judge(Clock::time_point now) const;

 private:
  bool heard_ = false;
  int64_t beats_ = 0;
  double limit_seconds_ = 0;
  Clock::time_point last_;
};

// What a wait does with each of the coordinator's beats besides taking it.
enum class BeatReply {
  kNone,       // nothing: this rank's heartbeat thread speaks for it
  kHeartbeat,  // a heartbeat back (step 0): before the assignment, when no heartbeat thread runs yet
};

// The coordinator's next message with `tag` (MPI_ANY_TAG: any but a beat), waiting up to `limit` while
// watching its beats: source = -1 when the limit passed, kRankFailed when the coordinator died. The
// message is looked for before the silence is judged, so that a last word sent just before the beats
// stopped is taken, not read as death. Main thread.
Result<Message> AwaitCoordinator(CoordinatorWatch& watch, int tag, std::chrono::duration<double> limit,
                                 BeatReply reply = BeatReply::kNone);

// A worker's first wait: says hello to the coordinator at once (host and pid, kTagStartup; no metrics port
// yet), then waits for its first word (the assignment, or a shutdown) however long it plans, answering
// each beat with a heartbeat. Fails as AwaitCoordinator does (the coordinator died). Main thread.
Result<Message> AwaitAssignment(const MpiSession& session, CoordinatorWatch& watch);

// Sends a heartbeat to the coordinator every interval until stopped, and ends this process (exit 5) when
// the coordinator has died: under `mpirun --enable-recovery` nobody else would, and the rank would train
// on, or wait, for nothing. Needs MPI_THREAD_MULTIPLE. `step` and `watch` must outlive it; from its start
// it is the only user of `watch`.
class HeartbeatThread {
 public:
  HeartbeatThread(std::atomic<int64_t>* step, std::chrono::duration<double> interval, CoordinatorWatch* watch,
                  const Logger& log);
  ~HeartbeatThread() { Stop(); }
  HeartbeatThread(const HeartbeatThread&) = delete;
  HeartbeatThread& operator=(const HeartbeatThread&) = delete;
  // Stops and joins the thread (idempotent).
  void Stop();

 private:
  void Loop();

  std::atomic<int64_t>* step_;
  std::chrono::duration<double> interval_;
  CoordinatorWatch* watch_;
  const Logger& log_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace tessel::workers
