#include "core/activity.h"

#include <algorithm>
#include <atomic>
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

// One calling thread's state: each thread reports its own kernel, so that a thread that keeps calling
// kernels (a prefetch thread) does not hide one that is stuck.
struct Slot {
  bool used = false;     // a kernel has run on this thread
  bool running = false;  // inside a kernel now
  Name op, device;       // the kernel inside, or the last one
  Clock::time_point started, ended;
  bool waiting = false;  // in a wait for a GPU stream now
  Name wait;
  Clock::time_point wait_since;
};

constexpr int kSlots = 64;  // threads past this share the last slot

struct State {
  std::mutex mu;
  Slot slots[kSlots];
  std::atomic<int> next{0};
  Name queued;  // the last CUDA kernel queued, by any thread
  Clock::time_point queued_at;
  bool any_queued = false;
};

State& Get() {
  static State* state = new State;  // never destroyed: a scope may close during exit
  return *state;
}

Slot& Mine(State& s) {
  thread_local const int index = std::min(s.next.fetch_add(1), kSlots - 1);
  return s.slots[index];
}

double Since(Clock::time_point t, Clock::time_point now) { return std::chrono::duration<double>(now - t).count(); }

}  // namespace

KernelScope::KernelScope(std::string_view op, std::string_view device) {
  State& s = Get();
  std::lock_guard<std::mutex> lock(s.mu);
  Slot& m = Mine(s);
  m.op.Set(op);
  m.device.Set(device);
  m.started = Clock::now();
  m.used = m.running = true;
}

KernelScope::~KernelScope() {
  State& s = Get();
  std::lock_guard<std::mutex> lock(s.mu);
  Slot& m = Mine(s);
  m.running = false;
  m.ended = Clock::now();
  if (std::strcmp(m.device.text, "cuda") == 0) {
    s.queued = m.op;
    s.queued_at = m.ended;
    s.any_queued = true;
  }
}

StreamWaitScope::StreamWaitScope(std::string_view what) {
  State& s = Get();
  std::lock_guard<std::mutex> lock(s.mu);
  Slot& m = Mine(s);
  m.wait.Set(what);
  m.wait_since = Clock::now();
  m.waiting = true;
}

StreamWaitScope::~StreamWaitScope() {
  State& s = Get();
  std::lock_guard<std::mutex> lock(s.mu);
  Mine(s).waiting = false;
}

std::string Describe() {
  State& s = Get();
  std::lock_guard<std::mutex> lock(s.mu);
  const Clock::time_point now = Clock::now();
  // The longest wait for a stream, else the longest-running kernel, else the kernel that ended last.
  const Slot *waiting = nullptr, *running = nullptr, *last = nullptr;
  for (const Slot& m : s.slots) {
    if (m.waiting && (waiting == nullptr || m.wait_since < waiting->wait_since)) waiting = &m;
    if (!m.used) continue;
    if (m.running && (running == nullptr || m.started < running->started)) running = &m;
    if (!m.running && (last == nullptr || m.ended > last->ended)) last = &m;
  }
  char line[320];
  if (waiting != nullptr) {
    const int n = std::snprintf(line, sizeof line, "waiting %.1f s for the GPU stream (%s)",
                                Since(waiting->wait_since, now), waiting->wait.text);
    if (s.any_queued && n > 0 && static_cast<size_t>(n) < sizeof line) {
      std::snprintf(line + n, sizeof line - static_cast<size_t>(n), "; the last kernel queued: %s (cuda), %.1f s ago",
                    s.queued.text, Since(s.queued_at, now));
    }
    return line;
  }
  if (running != nullptr) {
    std::snprintf(line, sizeof line, "in kernel %s (%s) for %.1f s", running->op.text, running->device.text,
                  Since(running->started, now));
    return line;
  }
  if (last == nullptr) return "";
  std::snprintf(line, sizeof line, "in no kernel; the last one: %s (%s), ended %.1f s ago", last->op.text,
                last->device.text, Since(last->ended, now));
  return line;
}

}  // namespace tessel::activity
