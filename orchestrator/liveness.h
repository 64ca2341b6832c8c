// How the coordinator keeps a job from hanging and tells launchers and ranks its fate: the status file
// (scripts/tessel-mpirun reads the exit code from it), the coordinator's beats to its workers, the
// embedded run's step watchdog, and the job's end, orderly or aborted.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/status.h"
#include "workers/comm/mpi_comm.h"

namespace tessel::orchestrator {

// The job's outcome for launchers: `mpirun --enable-recovery` (Open MPI 4.1) exits 0 whatever the ranks
// do, so scripts/tessel-mpirun reads the exit code from here. While the job runs the file says where the
// coordinator is ({"state": "running", "host", "pid"}), so that a launcher that finds no outcome at the
// end can say which process and host were lost; the coordinator's beats rewrite it every heartbeat
// interval with the silence after which a launcher may presume the coordinator lost ("timeout_seconds")
// and that interval ("interval_seconds": a worker's own verdict may take one more), the file's
// modification time being the beat. Once an outcome is written, a late beat changes nothing.
// Thread safety: any thread.
void WriteStatusFile(const std::string& path, const Status* status, double timeout_seconds = 0,
                     double interval_seconds = 0);

// Ends the job from the coordinator: prints the error, writes the status file, tells every worker (each
// leaves at once, whatever it waits for) and ends every rank with the status's exit code. Any thread.
[[noreturn]] void AbortJob(const Status& status, const std::string& status_file);

// Tells every worker the job ended (each goes on to MPI_Finalize with the coordinator).
void ShutdownWorkers(const workers::MpiSession& session);

// A thread that calls `tick` at once and then every `period` until the object is destroyed, or until
// `tick` returns false. The destructor wakes it and joins it.
class Ticker {
 public:
  Ticker(std::chrono::duration<double> period, std::function<bool()> tick);
  ~Ticker();
  Ticker(const Ticker&) = delete;
  Ticker& operator=(const Ticker&) = delete;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

// While the coordinator runs (planning included) every worker hears from it each heartbeat interval, so
// that a coordinator that dies (killed, out of memory) does not leave its workers training or waiting
// under `mpirun --enable-recovery`: a worker presumes it dead after timeouts.heartbeat_timeout_seconds of
// silence and exits 5 (workers/worker.cc, CoordinatorWatch). A thread of its own, so that a long plan or
// a big assignment does not hold the beats back; it needs MPI_THREAD_MULTIPLE.
class AliveBeats {
 public:
  // `status_file` (may be empty) gets a beat too, for the launcher (WriteStatusFile).
  AliveBeats(int world, double interval_seconds, double silence_limit_seconds, std::string status_file);

 private:
  bool Beat();

  const int world_;
  const std::chrono::duration<double> interval_;
  const double silence_limit_seconds_;
  const std::string status_file_;
  // Never freed: a beat that times out is cancelled, and Open MPI may not be done with a cancelled send's
  // buffer.
  const std::vector<uint8_t>& beat_;
  Ticker ticker_;  // last: stopped before the members it reads go
};

// The embedded run's step watchdog. One process trains there, with no coordinator rank to watch it: when no
// step has finished for `step_seconds` (the first step gets `startup_seconds` more, for the loading), it
// calls `on_hang` from its own thread with a kRankFailed status that names the step and what the compute
// is doing (core/activity.h). The training thread may be stuck inside a kernel or a GPU wait, so
// `on_hang` must end the process (AbortJob).
class StepWatchdog {
 public:
  using Clock = std::chrono::steady_clock;
  StepWatchdog(double step_seconds, double startup_seconds, std::string who,
               std::function<void(const Status&)> on_hang);

  // Step `step` finished (any thread).
  void Stepped(int64_t step) { Stepped(step, Clock::now()); }
  void Stepped(int64_t step, Clock::time_point now);
  // The verdict at `now`: OK while the step in progress is within its limit, else the kRankFailed report
  // (what the watchdog's thread passes to on_hang).
  Status Judge(Clock::time_point now);

 private:
  bool Check();

  const double step_seconds_, startup_seconds_;
  const std::string who_;
  const std::function<void(const Status&)> on_hang_;
  std::mutex mu_;
  int64_t step_ = 0;
  Clock::time_point since_;
  Ticker ticker_;  // last: stopped before the members it reads go
};

}  // namespace tessel::orchestrator
