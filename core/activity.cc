#include "core/activity.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>

namespace tessel::activity {
namespace {

using Clock = std::chrono::steady_clock;

// Fixed-size names: a scope never allocates, and a name outlives the kernel registry that owned it.
struct Name {
  char text[64] = {};
  void Set(std::string_view s) {
    const size_t n = std::min(s.size(), sizeof text - 1);
    std::memcpy(text, s.data(), n);
    text[n] = '\0';
  }
};

struct State {
  std::mutex mu;
  Name op, device;            // the kernel that started last
  Clock::time_point started;  // when it started
  Clock::time_point ended;    // when its scope ended (for CUDA: when it was queued)
  int running = 0;            // kernel scopes open (of any thread)
  bool any = false;           // a kernel has run
  Name queued;                // the last CUDA kernel queued
  Clock::time_point queued_at;
  bool any_queued = false;
  Name wait;  // the stream wait that started last
  Clock::time_point wait_since;
  int waiting = 0;
};

State& Get() {
  static State* state = new State;  // never destroyed: a scope may close during exit
  return *state;
}

double Since(Clock::time_point t, Clock::time_point now) { return std::chrono::duration<double>(now - t).count(); }

}  // namespace

KernelScope::KernelScope(std::string_view op, std::string_view device) {
  State& s = Get();
  std::lock_guard<std::mutex> lock(s.mu);
  s.op.Set(op);
  s.device.Set(device);
  s.started = Clock::now();
  s.any = true;
  ++s.running;
}

KernelScope::~KernelScope() {
  State& s = Get();
  std::lock_guard<std::mutex> lock(s.mu);
  --s.running;
  s.ended = Clock::now();
  if (std::strcmp(s.device.text, "cuda") == 0) {
    s.queued = s.op;
    s.queued_at = s.ended;
    s.any_queued = true;
  }
}

StreamWaitScope::StreamWaitScope(std::string_view what) {
  State& s = Get();
  std::lock_guard<std::mutex> lock(s.mu);
  s.wait.Set(what);
  s.wait_since = Clock::now();
  ++s.waiting;
}

StreamWaitScope::~StreamWaitScope() {
  State& s = Get();
  std::lock_guard<std::mutex> lock(s.mu);
  --s.waiting;
}

std::string Describe() {
  State& s = Get();
  std::lock_guard<std::mutex> lock(s.mu);
  const Clock::time_point now = Clock::now();
  char line[320];
  if (s.waiting > 0) {
    const int n = std::snprintf(line, sizeof line, "waiting %.1f s for the GPU stream (%s)", Since(s.wait_since, now),
                                s.wait.text);
    if (s.any_queued && n > 0 && static_cast<size_t>(n) < sizeof line) {
      std::snprintf(line + n, sizeof line - static_cast<size_t>(n), "; the last kernel queued: %s (cuda), %.1f s ago",
                    s.queued.text, Since(s.queued_at, now));
    }
    return line;
  }
  if (!s.any) return "";
  if (s.running > 0) {
    std::snprintf(line, sizeof line, "in kernel %s (%s) for %.1f s", s.op.text, s.device.text, Since(s.started, now));
  } else {
    std::snprintf(line, sizeof line, "in no kernel; the last one: %s (%s), ended %.1f s ago", s.op.text, s.device.text,
                  Since(s.ended, now));
  }
  return line;
}

}  // namespace tessel::activity
