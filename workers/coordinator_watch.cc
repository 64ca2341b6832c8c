#include "workers/coordinator_watch.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "core/activity.h"
#include "core/stop_signal.h"
#include "workers/protocol.h"

namespace tessel::workers {

using Seconds = std::chrono::duration<double>;

void CoordinatorWatch::Heard(const Message& m, Clock::time_point now) {
  AliveMsg alive;
  if (!Decode(m.bytes, &alive).ok() || !(alive.silence_limit_seconds > 0)) return;
  limit_seconds_ = alive.silence_limit_seconds;
  last_ = now;
  heard_ = true;
  ++beats_;
}

void CoordinatorWatch::TakeStop(const Message& m) {
  StopMsg stop;
  if (Decode(m.bytes, &stop).ok() && stop.signal > 0) RequestStop(stop.signal);
}

Seconds CoordinatorWatch::UntilPresumedDead(Seconds cap, Clock::time_point now) const {
  if (!heard_) return cap;
  const Seconds left = Seconds(limit_seconds_) - (now - last_);
  return std::max(Seconds(0.01), std::min(cap, left));
}

Status CoordinatorWatch::Check() {
  for (;;) {
    TESSEL_ASSIGN_OR_RETURN(Message m, TryReceive(0, kTagAlive));
    if (m.source < 0) break;
    Heard(m);
  }
  for (;;) {
    TESSEL_ASSIGN_OR_RETURN(Message m, TryReceive(0, kTagStop));
    if (m.source < 0) break;
    TakeStop(m);
  }
  return Judge(Clock::now());
}

Status CoordinatorWatch::Judge(Clock::time_point now) const {
  if (!heard_) return Status();
  const double silent = Seconds(now - last_).count();
  if (silent <= limit_seconds_) return Status();
  char buf[160];
  std::snprintf(buf, sizeof buf,
                "the coordinator (rank 0) has sent nothing for %.1f s (timeouts.heartbeat_timeout_seconds = %g)",
                silent, limit_seconds_);
  return RankFailedError(StrCat(buf, ": presumed dead; stopping this rank"));
}

Result<Message> AwaitCoordinator(CoordinatorWatch& watch, int tag, Seconds limit, BeatReply reply) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  Backoff backoff;
  int64_t answered = watch.beats();
  // Each beat taken (here or by Check) gets its answer. Small, so it goes out at once; one the
  // coordinator cannot take is its own silence, which the watch judges.
  const auto answer = [&](const char* doing) {
    if (reply == BeatReply::kHeartbeat && watch.beats() != answered) {
      answered = watch.beats();
      (void)SendBytes(Encode(HeartbeatMsg{0, doing}), 0, kTagHeartbeat, watch.UntilPresumedDead(Seconds(1)));
    }
  };
  // While a large message (a multi-GB assignment) arrives: the beats are still taken and answered.
  const auto between = [&] {
    if (Result<Message> beat = TryReceive(0, kTagAlive); beat.ok() && beat->source >= 0) watch.Heard(*beat);
    answer("receiving its assignment");
  };
  for (;;) {
    answer("waiting for its assignment");
    TESSEL_ASSIGN_OR_RETURN(Message m, TryReceive(0, tag, between));
    if (m.source >= 0 && m.tag == kTagAlive) {
      watch.Heard(m);
      continue;
    }
    if (m.source >= 0 && m.tag == kTagStop) {
      CoordinatorWatch::TakeStop(m);
      continue;
    }
    if (m.source >= 0) return m;
    TESSEL_RETURN_IF_ERROR(watch.Check());
    if (std::chrono::steady_clock::now() > deadline) return m;
    backoff.Wait();
  }
}

Result<Message> AwaitAssignment(const MpiSession& session, CoordinatorWatch& watch) {
  // Before anything else: from here the coordinator can name this rank, and judge its silence by the
  // heartbeat timeout, whatever it is doing (importing, partitioning, dispatching to the others). A hello
  // that cannot go out is no failure here: the coordinator's startup limit still judges this rank.
  (void)SendBytes(Encode(HelloMsg{session.hostname(), static_cast<int64_t>(::getpid()), 0}), 0, kTagStartup,
                  std::chrono::seconds(5));
  // The coordinator validates and plans first; that can take a while on a big graph.
  return AwaitCoordinator(watch, MPI_ANY_TAG, std::chrono::hours(24), BeatReply::kHeartbeat);
}

HeartbeatThread::HeartbeatThread(std::atomic<int64_t>* step, Seconds interval, CoordinatorWatch* watch,
                                 const Logger& log)
    : step_(step), interval_(interval), watch_(watch), log_(log) {
  thread_ = std::thread([this] { Loop(); });
}

void HeartbeatThread::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void HeartbeatThread::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    lock.unlock();
    // A failed heartbeat is not fatal here: the coordinator's timeout decides. A send to a dead
    // coordinator waits out its limit, so the limit ends where the coordinator is presumed dead: a fixed
    // 4 intervals put up to 2 s on top of the heartbeat timeout (a drill measured 7.2 s where the
    // bound is the 5 s timeout + 2 s).
    (void)SendBytes(Encode(HeartbeatMsg{step_->load(), activity::Describe()}), 0, kTagHeartbeat,
                    watch_->UntilPresumedDead(interval_ * 4));
    // The coordinator is aborting the job (it has printed why): leave at once, whatever the training
    // thread is waiting for.
    if (auto abort = TryReceive(0, kTagAbort); abort.ok() && abort->source >= 0) {
      log_.Debug("the coordinator is aborting the job; leaving");
      std::fflush(stderr);
      std::_Exit(static_cast<int>(Code::kRankFailed));
    }
    if (const Status alive = watch_->Check(); !alive.ok()) {
      // The training thread may be inside a kernel or a collective: end the process from here. Nothing
      // is lost that a live coordinator would have kept: checkpoints are renamed into place whole, and
      // the next run on this node removes the dead run's spill file.
      log_.Error(alive.message());
      std::fflush(stderr);
      // Said to the coordinator too, briefly: one that was only stopped or frozen reads it when it runs
      // again, and reports this rather than the silence of the workers that left.
      (void)SendBytes(Encode(ErrorMsg{alive.exit_code(), step_->load(), alive.message()}), 0, kTagError,
                      std::chrono::milliseconds(200));
      std::_Exit(alive.exit_code());
    }
    lock.lock();
    cv_.wait_for(lock, interval_, [this] { return stop_; });
  }
}

}  // namespace tessel::workers
