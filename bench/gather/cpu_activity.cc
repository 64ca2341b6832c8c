#include "cpu_activity.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

namespace tessel::bench {

CpuSample SampleCpu() {
  CpuSample s;
  std::ifstream stat("/proc/stat");
  std::string line;
  if (!std::getline(stat, line) || line.rfind("cpu ", 0) != 0) return s;
  std::istringstream fields(line.substr(4));
  uint64_t v = 0;
  for (int i = 0; fields >> v; ++i) {
    s.total += v;
    if (i == 3 || i == 4) s.idle += v;  // idle, iowait
  }
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  s.self_seconds = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                   static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
  s.ok = s.total > 0;
  return s;
}

double BusyFraction(const CpuSample& a, const CpuSample& b) {
  if (!a.ok || !b.ok || b.total <= a.total) return -1;
  return 1.0 - static_cast<double>(b.idle - a.idle) / static_cast<double>(b.total - a.total);
}

double OthersBusyFraction(const CpuSample& a, const CpuSample& b) {
  if (!a.ok || !b.ok || b.total <= a.total) return -1;
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double busy = static_cast<double>((b.total - a.total) - (b.idle - a.idle));
  const double self = (b.self_seconds - a.self_seconds) * ticks;
  return std::max(0.0, (busy - self) / static_cast<double>(b.total - a.total));
}

double WaitIdle(double limit_seconds) {
  auto busy_over = [](double seconds) {
    const CpuSample a = SampleCpu();
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    return BusyFraction(a, SampleCpu());
  };
  double busy = busy_over(0.5);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(limit_seconds);
  while (busy > 0.10 && std::chrono::steady_clock::now() < deadline) busy = busy_over(1.0);
  return busy;
}

double LoadAverage() {
  std::ifstream f("/proc/loadavg");
  double load = -1;
  return f >> load ? load : -1;
}

}  // namespace tessel::bench
