// The calling process's resident memory, as the kernel counts it (every resident page: the heap, thread
// stacks, libraries' code and data), for the planner's memory model and the workers' reports; and the
// memory it may have at most.
// Thread safety: both functions may be called from any thread.
#pragma once

#include <cstdint>

namespace tessel {

// Resident bytes now (/proc/self/statm); 0 where that cannot be read.
int64_t ResidentBytes();

// The most bytes ever resident (getrusage's ru_maxrss).
int64_t PeakResidentBytes();

// The memory this process may use at most: the host's physical memory, or the limit of its cgroup (v2
// memory.max, v1 memory.limit_in_bytes: a container's or a Slurm job's) where that is lower; 0 where
// neither can be read.
int64_t HostMemoryBytes();

}  // namespace tessel
