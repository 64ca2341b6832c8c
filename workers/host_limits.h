// A worker's share of the job against the host it runs on: resources.threads_per_worker against its cores
// (the coordinator validates the job, maybe on another host, against the schema's fixed cap, 1024), and
// the plan's memory estimate against its memory. Thread safety: any thread. Failure: kUsage (exit 2) for
// threads, kStorage (exit 6) for memory, naming the key or the settings, the worker and its host.
#pragma once

#include <cstdint>
#include <string>

#include "core/allocator.h"
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

// kStorage ("out of memory: ...") when a CPU worker's share, `predicted_bytes` by the plan, exceeds the
// memory this process may have (HostMemoryBytes), naming `sized_by` (AssignmentPayload::SizedBy). Checked
// before the executor allocates: Linux grants a large allocation and its OOM killer ends the process later
// (SIGKILL, no message). A GPU worker's tensors are in device memory, where cudaMalloc fails cleanly (and
// the executor's allocation failure names the same settings); predicted_bytes 0 (no estimate) passes.
Status CheckMemory(int64_t predicted_bytes, Device device, const std::string& sized_by, int worker, Launch launch);

}  // namespace tessel::workers
