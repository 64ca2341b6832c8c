// What the compute is doing (core/activity.h), as a hang report names it. The state is process-wide, so
// one test walks the sequence: nothing yet, a CPU kernel inside and after, a CUDA kernel queued and a
// wait for its stream, a kernel on another thread, a stuck kernel while another thread keeps calling
// kernels, a name longer than the buffer.
#include "core/activity.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <thread>

namespace tessel::activity {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::Not;

TEST(Activity, NamesTheKernelTheStreamWaitAndTheLastKernel) {
  EXPECT_EQ(Describe(), "") << "no kernel has run in this binary yet";
  {
    KernelScope k("nn.relu.fwd", "cpu");
    EXPECT_THAT(Describe(), MatchesRegex("in kernel nn\\.relu\\.fwd \\(cpu\\) for [0-9]+\\.[0-9] s"));
  }
  EXPECT_THAT(Describe(), MatchesRegex("in no kernel; the last one: nn\\.relu\\.fwd \\(cpu\\), ended [0-9.]+ s ago"));
  {
    StreamWaitScope w("a copy of 8 bytes");
    EXPECT_EQ(Describe().rfind("waiting ", 0), 0u);
    EXPECT_THAT(Describe(), Not(HasSubstr("queued"))) << "no CUDA kernel was queued";
  }
  { KernelScope k("llm.attention.bwd", "cuda"); }
  { KernelScope k("nn.gemm", "cpu"); }  // a CPU kernel after it does not replace the queued one
  {
    StreamWaitScope w("a copy of 4096 bytes");
    EXPECT_THAT(Describe(), MatchesRegex("waiting [0-9.]+ s for the GPU stream \\(a copy of 4096 bytes\\); the last "
                                         "kernel queued: llm\\.attention\\.bwd \\(cuda\\), [0-9.]+ s ago"));
  }
  EXPECT_THAT(Describe(), HasSubstr("the last one: nn.gemm (cpu)"));
  // A kernel running on another thread is named while it runs.
  std::thread t([] {
    KernelScope k("rgnn.rgcn.fwd", "cpu");
    EXPECT_THAT(Describe(), HasSubstr("in kernel rgnn.rgcn.fwd (cpu)"));
  });
  t.join();
  // A kernel stuck on one thread stays named while another thread keeps calling kernels (a prefetch
  // thread's gathers): the longest-running one is named, not the last to start.
  {
    KernelScope stuck("nn.relu.fwd", "cpu");
    std::thread other([] {
      for (int i = 0; i < 3; ++i) KernelScope k("gather.rows", "cpu");
      KernelScope again("gather.rows", "cpu");
      EXPECT_THAT(Describe(), HasSubstr("in kernel nn.relu.fwd (cpu)"));
    });
    other.join();
    EXPECT_THAT(Describe(), HasSubstr("in kernel nn.relu.fwd (cpu)"));
  }
  EXPECT_THAT(Describe(), HasSubstr("the last one: nn.relu.fwd (cpu)"));
  // A name longer than the buffer is cut, not overrun.
  {
    KernelScope k(std::string(200, 'x'), "cpu");
    EXPECT_THAT(Describe(), HasSubstr("in kernel " + std::string(63, 'x') + " (cpu)"));
  }
}

}  // namespace
}  // namespace tessel::activity
