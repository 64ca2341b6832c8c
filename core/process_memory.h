// The calling process's resident memory, as the kernel counts it (every resident page: the heap, thread
// stacks, libraries' code and data), for the planner's memory model and the workers' reports.
// Thread safety: both functions may be called from any thread.
#pragma once

#include <cstdint>

namespace tessel {

// Resident bytes now (/proc/self/statm); 0 where that cannot be read.
int64_t ResidentBytes();

// The most bytes ever resident (getrusage's ru_maxrss).
int64_t PeakResidentBytes();

}  // namespace tessel
