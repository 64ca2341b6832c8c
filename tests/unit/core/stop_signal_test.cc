// Stop requests (core/stop_signal.h): a signal after InstallStopHandlers is recorded, not fatal; the
// first request wins; a second SIGTERM would take the default action (not raised here: it would end the
// test binary). The flag is process-wide, so one test covers the sequence.
#include "core/stop_signal.h"

#include <gtest/gtest.h>
#include <signal.h>

namespace tessel {
namespace {

TEST(StopSignal, FirstSignalIsRecordedAndLaterOnesDoNotReplaceIt) {
  ASSERT_EQ(StopSignal(), 0);
  InstallStopHandlers();
  InstallStopHandlers();         // idempotent
  ASSERT_EQ(raise(SIGUSR1), 0);  // without the handler this would end the process
  EXPECT_EQ(StopSignal(), SIGUSR1);
  RequestStop(SIGTERM);
  EXPECT_EQ(StopSignal(), SIGUSR1) << "the first request wins";
  // SIGTERM's handler puts the default action back once it has run: a second SIGTERM ends the process.
  ASSERT_EQ(raise(SIGTERM), 0);
  EXPECT_EQ(StopSignal(), SIGUSR1);
  struct sigaction now;
  ASSERT_EQ(sigaction(SIGTERM, nullptr, &now), 0);
  EXPECT_EQ(now.sa_handler, SIG_DFL);
}

TEST(StopSignal, NamesTheSignals) {
  EXPECT_EQ(SignalName(SIGTERM), "SIGTERM");
  EXPECT_EQ(SignalName(SIGINT), "SIGINT");
  EXPECT_EQ(SignalName(SIGUSR1), "SIGUSR1");
  EXPECT_EQ(SignalName(SIGHUP), "signal " + std::to_string(SIGHUP));
  EXPECT_EQ(SignalName(kTimeLimitStop), "job.time_limit_seconds");  // the time limit's stop (issue 32 row 9)
}

}  // namespace
}  // namespace tessel
