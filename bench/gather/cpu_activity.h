// How busy the machine's cores are, from /proc/stat, and how much of that is other work than this
// process (its own CPU time from getrusage): on a shared machine a gather whose two threads lose a core
// to a compiler slows down far more than a copy that one core can nearly saturate, so each measurement
// records what shared the cores with it.
// Thread safety: any thread. Failure: a sample that cannot be read gives fractions of -1.
#pragma once

#include <cstdint>

namespace tessel::bench {

struct CpuSample {
  uint64_t total = 0;       // jiffies of every core, all states
  uint64_t idle = 0;        // idle + iowait jiffies
  double self_seconds = 0;  // this process's user + system CPU time
  bool ok = false;
};

CpuSample SampleCpu();

// The busy share of all cores between two samples, and the share taken by other processes.
double BusyFraction(const CpuSample& a, const CpuSample& b);
double OthersBusyFraction(const CpuSample& a, const CpuSample& b);

// Waits up to `limit_seconds` for the cores to be less than 10% busy (sampled over 1 s at a time) and
// returns the busy fraction it saw last (one 0.5 s sample when limit_seconds is 0).
double WaitIdle(double limit_seconds);

// The 1-minute load average, or -1.
double LoadAverage();

}  // namespace tessel::bench
