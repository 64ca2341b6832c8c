#include "core/stop_signal.h"

#include <signal.h>

#include <atomic>
#include <cstring>

namespace tessel {
namespace {

std::atomic<int> g_stop_signal{0};
static_assert(std::atomic<int>::is_always_lock_free, "the signal handler stores into it");

void OnStopSignal(int signal) {
  int none = 0;
  g_stop_signal.compare_exchange_strong(none, signal);
  // A second SIGTERM or SIGINT takes the default action: the process ends at once.
  if (signal == SIGTERM || signal == SIGINT) {
    struct sigaction dfl;
    std::memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigaction(signal, &dfl, nullptr);
  }
}

}  // namespace

void InstallStopHandlers() {
  static const bool installed = [] {
    for (int s : {SIGTERM, SIGINT, SIGUSR1}) {
      struct sigaction sa;
      std::memset(&sa, 0, sizeof sa);
      sa.sa_handler = OnStopSignal;
      sigemptyset(&sa.sa_mask);
      sa.sa_flags = SA_RESTART;  // blocking I/O and MPI's polls carry on; the step loop looks at the flag
      sigaction(s, &sa, nullptr);
    }
    return true;
  }();
  (void)installed;
}

int StopSignal() { return g_stop_signal.load(); }

void RequestStop(int signal) {
  int none = 0;
  g_stop_signal.compare_exchange_strong(none, signal);
}

std::string SignalName(int signal) {
  switch (signal) {
    case SIGTERM:
      return "SIGTERM";
    case SIGINT:
      return "SIGINT";
    case SIGUSR1:
      return "SIGUSR1";
    case kTimeLimitStop:
      return "job.time_limit_seconds";
    default:
      return "signal " + std::to_string(signal);
  }
}

}  // namespace tessel
