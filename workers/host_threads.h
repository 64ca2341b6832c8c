// resources.threads_per_worker against the host a worker runs on. The coordinator validates the job, maybe
// on another host, against the schema's fixed cap (1024); each worker checks the cores it has.
// Thread safety: any thread. Failure: kUsage (exit 2) naming the key, the worker and its host.
#pragma once

#include <cstdint>

#include "core/logging.h"
#include "core/status.h"

namespace tessel::workers {

// Who runs the assignment: the one process of an embedded run, or a worker rank under mpirun (for messages
// that name what placed it).
enum class Launch { kEmbedded, kMpiWorker };

// kUsage when `threads` exceeds this host's cores (std::thread::hardware_concurrency); a warning on `log`
// when this process's CPU affinity allows fewer cores than `threads` (naming mpirun's binding only under
// mpirun). `worker` is the worker's rank among the workers.
Status CheckThreads(int32_t threads, int worker, Launch launch, const Logger& log);

}  // namespace tessel::workers
