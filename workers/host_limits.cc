#include "workers/host_limits.h"

#include <sched.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <thread>

#include "core/process_memory.h"

namespace tessel::workers {

namespace {

std::string Who(int worker, Launch launch) {
  char host[256] = "?";
  (void)gethostname(host, sizeof host - 1);
  return launch == Launch::kEmbedded ? StrCat("this process (rank 0, embedded, on ", host, ")")
                                     : StrCat("worker ", worker, " (on ", host, ")");
}

std::string Bytes(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g GB", bytes * 1e-9);
  return text;
}

}  // namespace

// mpirun binds each rank to one core by default (Open MPI 4.1 with 2 ranks or fewer
// per node: --bind-to core), which silently runs a worker's threads on that one core.
Status CheckThreads(int32_t threads, int worker, Launch launch, const Logger& log) {
  const std::string who = Who(worker, launch);
  if (const unsigned cores = std::thread::hardware_concurrency(); cores > 0 && static_cast<unsigned>(threads) > cores) {
    return UsageError(StrCat("resources.threads_per_worker = ", threads, " but ", who, " has ", cores, " core",
                             cores == 1 ? "" : "s", ": set it to at most ", cores));
  }
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return Status();
  const int cores = CPU_COUNT(&set);
  if (cores >= threads) return Status();
  const std::string prefix = StrCat(who, " may run on ", cores, " core", cores == 1 ? "" : "s",
                                    " but resources.threads_per_worker = ", threads, ": ");
  if (launch == Launch::kEmbedded) {
    log.Warn(prefix +
             "its CPU affinity (taskset, numactl, a Slurm or container cpuset) allows no more; its threads "
             "share them. Lower threads_per_worker, or widen the affinity");
  } else {
    log.Warn(prefix +
             "mpirun bound it; start it with --bind-to none (scripts/tessel-mpirun does) or --map-by slot:PE=" +
             std::to_string(threads));
  }
  return Status();
}

Status CheckMemory(int64_t predicted_bytes, Device device, const std::string& sized_by, int worker, Launch launch) {
  const int64_t host = HostMemoryBytes();
  if (device != Device::kCpu || predicted_bytes <= 0 || host <= 0 || predicted_bytes <= host) return Status();
  return StorageError(StrCat("out of memory: ", Who(worker, launch), " would need about ",
                             Bytes(static_cast<double>(predicted_bytes)),
                             " for its share (the plan's estimate: `tessel "
                             "plan` shows it), more than the ",
                             Bytes(static_cast<double>(host)), " of memory it may have; the share is sized by ",
                             sized_by, ": lower them or add workers; nothing was allocated"));
}

}  // namespace tessel::workers
