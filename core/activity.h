// What this process's compute is doing, for the report of a step that does not end: the kernel a thread
// is inside (a CPU kernel runs on its caller's thread), the last kernel queued on a GPU stream, and a host
// wait for a GPU stream. The worker's heartbeat thread sends Describe() with each beat and the
// coordinator's step watchdog names it; in an embedded run the coordinator's own watchdog reads it.
//
//   in kernel nn.relu.fwd (cpu) for 12.0 s
//   waiting 12.0 s for the GPU stream (a copy of 4096 bytes); the last kernel queued: llm.attention.bwd (cuda), 12.1 s
//   ago in no kernel; the last one: nn.gemm (cpu), ended 12.0 s ago
//
// A kernel that stops making progress on a GPU does not fail its launch: the host learns of it at its next
// wait for the stream, which never returns. The kernel named is the last one queued before that wait; a
// stream runs its kernels in order, so the stuck one is it or one queued before it since the last wait.
//
// Each calling thread keeps its own record (64 threads; more share the last record), and Describe()
// names the longest wait for a stream, else the kernel running longest, else the kernel that ended last:
// a thread that keeps calling kernels (a prefetch thread) does not hide one that is stuck.
// Thread safety: every function may be called from any thread. Cost: a lock and a copy of at most 63
// bytes per scope. Failure: none.
#pragma once

#include <string>
#include <string_view>

namespace tessel::activity {

// Marks a kernel call for its duration. `device` is "cpu" or "cuda": a CUDA kernel's scope ends once it is
// queued, and it is remembered as the stream's last queued kernel.
class KernelScope {
 public:
  KernelScope(std::string_view op, std::string_view device);
  ~KernelScope();
  KernelScope(const KernelScope&) = delete;
  KernelScope& operator=(const KernelScope&) = delete;
};

// Marks a host wait for a GPU stream; `what` says what for ("a copy of 4096 bytes").
class StreamWaitScope {
 public:
  explicit StreamWaitScope(std::string_view what);
  ~StreamWaitScope();
  StreamWaitScope(const StreamWaitScope&) = delete;
  StreamWaitScope& operator=(const StreamWaitScope&) = delete;
};

// One clause for a hang report, as above; "" before the first kernel or wait.
std::string Describe();

}  // namespace tessel::activity
