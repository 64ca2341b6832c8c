// The liveness verdicts, driven by a clock the test sets rather than the wall clock: the coordinator's
// judgement of its workers (silent, hung, and its own stall forgiven), the embedded step watchdog, the
// status file's late beat after an outcome, and the ticker. The cluster drills (tests/cluster) run the
// same code with real processes and real faults.
#include "orchestrator/liveness.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>

#include "orchestrator/worker_state.h"

namespace tessel::orchestrator {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

const WorkerLimits kLimits{seconds(5), seconds(60), seconds(30)};  // heartbeat, startup, step

std::map<int, WorkerState> ThreeWorkers(Clock::time_point t0) {
  std::map<int, WorkerState> state = InitialWorkerStates(4, t0, {});
  for (auto& [r, s] : state) {
    s.info.host = "node" + std::to_string(r);
    s.info.pid = 100 + r;
  }
  return state;
}

TEST(WorkerVerdicts, AWorkerNeverHeardFromIsJudgedByTheStartupLimit) {
  const Clock::time_point t0{};
  std::map<int, WorkerState> state = InitialWorkerStates(3, t0, {});
  int rank = -1;
  EXPECT_TRUE(FindSilentWorker(state, t0 + seconds(59), kLimits, &rank).ok()) << "the heartbeat limit is not its";
  const Status st = FindSilentWorker(state, t0 + seconds(61), kLimits, &rank);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), Code::kRankFailed);
  EXPECT_EQ(rank, 1);
  EXPECT_NE(st.message().find("has not been heard from since the job started"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("timeouts.startup_seconds"), std::string::npos) << st.message();
}

TEST(WorkerVerdicts, ASilentWorkerIsNamedWithItsHostPidAndLastStep) {
  const Clock::time_point t0{};
  std::map<int, WorkerState> state = ThreeWorkers(t0);
  for (auto& [r, s] : state) s.heard = s.hello = true;
  state[2].step = 41;
  state[2].activity = "nn.linear.fwd";
  state[1].last_seen = state[3].last_seen = t0 + seconds(4);  // the others keep beating
  int rank = -1;
  EXPECT_TRUE(FindSilentWorker(state, t0 + seconds(5), kLimits, &rank).ok());
  const Status st = FindSilentWorker(state, t0 + milliseconds(5100), kLimits, &rank);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(rank, 2);
  for (const char* part : {"rank 2 (worker on node2, pid 102)", "sent no heartbeat for 5.1 s",
                           "timeouts.heartbeat_timeout_seconds", "last step 41", "nn.linear.fwd"}) {
    EXPECT_NE(st.message().find(part), std::string::npos) << part << " in: " << st.message();
  }
  state[2].done = true;  // a worker that finished is silent by right
  EXPECT_TRUE(FindSilentWorker(state, t0 + milliseconds(5100), kLimits, &rank).ok());
}

TEST(WorkerVerdicts, AWorkerAliveOnAFrozenStepIsHung) {
  const Clock::time_point t0{};
  std::map<int, WorkerState> state = ThreeWorkers(t0);
  int rank = -1;
  // Before its ready hello a worker is loading: the step limit does not apply yet.
  EXPECT_TRUE(FindHungWorker(state, t0 + seconds(31), kLimits, &rank).ok());
  for (auto& [r, s] : state) s.heard = s.hello = true;
  state[3].step = 7;
  state[1].last_step_change = state[2].last_step_change = t0 + seconds(20);
  EXPECT_TRUE(FindHungWorker(state, t0 + seconds(30), kLimits, &rank).ok());
  const Status st = FindHungWorker(state, t0 + seconds(31), kLimits, &rank);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(rank, 3);
  EXPECT_NE(st.message().find("is alive but has not finished step 8 within 30 s"), std::string::npos) << st.message();
}

TEST(WorkerVerdicts, TheCoordinatorsOwnStallIsNotCountedAgainstItsWorkers) {
  const Clock::time_point t0{};
  std::map<int, WorkerState> state = ThreeWorkers(t0);
  for (auto& [r, s] : state) s.heard = s.hello = true;
  // Last heard at t0 + 3 s; then the coordinator itself does not run for 40 s (SIGSTOP, a frozen host).
  for (auto& [r, s] : state) s.last_seen = s.last_step_change = t0 + seconds(3);
  const Clock::time_point before = t0 + seconds(4), after = t0 + seconds(44);
  EXPECT_EQ(ForgiveOwnStall(state, before, after).count(), 40.0);
  int rank = -1;
  EXPECT_TRUE(FindSilentWorker(state, after, kLimits, &rank).ok()) << "the stall counted against the workers";
  EXPECT_TRUE(FindHungWorker(state, after, kLimits, &rank).ok());
  // After the stall the clock runs for them again: 5 s more of real silence is a verdict.
  EXPECT_FALSE(FindSilentWorker(state, after + milliseconds(4100), kLimits, &rank).ok());
  // A turn under a second apart is the loop's normal pace: nothing moves.
  std::map<int, WorkerState> again = ThreeWorkers(t0);
  EXPECT_EQ(ForgiveOwnStall(again, t0, t0 + milliseconds(900)).count(), 0.0);
  EXPECT_EQ(again[1].last_seen, t0);
}

TEST(StepWatchdog, TheFirstStepHasTheStartupLimitTooAndLaterStepsOnlyTheirOwn) {
  std::atomic<int> hangs{0};
  // Limits far beyond the test's run, so the watchdog's own thread never judges; the test judges.
  StepWatchdog dog(1e6, 1e6, "the embedded run", [&](const Status&) { ++hangs; });
  const Clock::time_point t0 = Clock::now();
  dog.Stepped(0, t0);
  EXPECT_TRUE(dog.Judge(t0 + seconds(1'999'000)).ok());
  const Status first = dog.Judge(t0 + seconds(2'000'001));
  ASSERT_FALSE(first.ok());
  EXPECT_EQ(first.code(), Code::kRankFailed);
  EXPECT_NE(first.message().find("has not finished step 1"), std::string::npos) << first.message();
  EXPECT_NE(first.message().find("timeouts.startup_seconds"), std::string::npos) << first.message();
  dog.Stepped(3, t0);
  EXPECT_FALSE(dog.Judge(t0 + seconds(1'000'001)).ok()) << "after step 3 the startup allowance is spent";
  dog.Stepped(3, t0 + seconds(10));
  const Status later = dog.Judge(t0 + seconds(1'000'011));
  ASSERT_FALSE(later.ok());
  EXPECT_NE(later.message().find("has not finished step 4 within 1e+06 s (timeouts.step_seconds)"), std::string::npos)
      << later.message();
  EXPECT_EQ(hangs.load(), 0);
}

TEST(StatusFile, ALateBeatAfterTheOutcomeChangesNothing) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("tessel-status-" + std::to_string(::getpid()) + ".json")).string();
  auto read = [&] {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  };
  WriteStatusFile(path, nullptr, 5, 1);
  EXPECT_NE(read().find("\"state\":\"running\""), std::string::npos) << read();
  EXPECT_NE(read().find("\"timeout_seconds\":5"), std::string::npos) << read();
  const Status failed = RankFailedError("rank 2 (worker) sent no heartbeat");
  WriteStatusFile(path, &failed);
  const std::string outcome = read();
  EXPECT_NE(outcome.find("\"state\":\"done\""), std::string::npos) << outcome;
  EXPECT_NE(outcome.find("\"exit_code\":5"), std::string::npos) << outcome;
  WriteStatusFile(path, nullptr, 5, 1);  // the beat thread, a moment late
  EXPECT_EQ(read(), outcome);
  std::filesystem::remove(path);
}

// No wall-clock bound here: a ticker that ticked again, or a destructor that waited out its hour, would
// leave the test hanging past CTest's timeout, which fails it.
TEST(Ticker, TicksAtOnceStopsWhenToldAndIsWokenByItsEnd) {
  std::atomic<int> ticks{0};
  {
    Ticker once(std::chrono::hours(1), [&] { return ++ticks < 0; });  // false at once: no second tick
    while (ticks.load() == 0) std::this_thread::sleep_for(milliseconds(1));
  }
  EXPECT_EQ(ticks.load(), 1);
  std::atomic<int> idle_ticks{0};
  {
    Ticker idle(std::chrono::hours(1), [&] { return ++idle_ticks > 0; });
    while (idle_ticks.load() == 0) std::this_thread::sleep_for(milliseconds(1));
  }  // the destructor wakes it from its hour's wait
  EXPECT_EQ(idle_ticks.load(), 1);
}

}  // namespace
}  // namespace tessel::orchestrator
