#include "workers/host_threads.h"

#include <sched.h>
#include <unistd.h>

#include <string>
#include <thread>

namespace tessel::workers {

// mpirun binds each rank to one core by default (Open MPI 4.1 with 2 ranks or fewer
// per node: --bind-to core), which silently runs a worker's threads on that one core.
Status CheckThreads(int32_t threads, int worker, Launch launch, const Logger& log) {
  char host[256] = "?";
  (void)gethostname(host, sizeof host - 1);
  const std::string who = launch == Launch::kEmbedded ? StrCat("this process (rank 0, embedded, on ", host, ")")
                                                      : StrCat("worker ", worker, " (on ", host, ")");
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
    log.Warn(prefix + "its CPU affinity (taskset, numactl, a Slurm or container cpuset) allows no more; its threads "
             "share them. Lower threads_per_worker, or widen the affinity");
  } else {
    log.Warn(prefix + "mpirun bound it; start it with --bind-to none (scripts/tessel-mpirun does) or --map-by slot:PE=" +
             std::to_string(threads));
  }
  return Status();
}

}  // namespace tessel::workers
