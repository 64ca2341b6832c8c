// A worker's verdict on its coordinator, on a clock the test sets: silent past the limit its beats carry
// is presumed dead; every beat resets the silence; before the first beat nothing is judged.
#include "workers/coordinator_watch.h"

#include <gtest/gtest.h>

#include <string>

#include "workers/protocol.h"

namespace tessel::workers {
namespace {

using Clock = CoordinatorWatch::Clock;
using Seconds = CoordinatorWatch::Seconds;
using std::chrono::milliseconds;
using std::chrono::seconds;

Message Beat(double limit_seconds) {
  Message m;
  m.source = 0;
  m.tag = kTagAlive;
  m.bytes = Encode(AliveMsg{limit_seconds});
  return m;
}

TEST(CoordinatorWatch, NothingIsJudgedBeforeTheFirstBeat) {
  CoordinatorWatch watch;
  const Clock::time_point t0{};
  EXPECT_FALSE(watch.heard());
  EXPECT_TRUE(watch.Judge(t0 + seconds(3600)).ok());
  EXPECT_EQ(watch.UntilPresumedDead(Seconds(7), t0).count(), 7.0);
}

TEST(CoordinatorWatch, AFrozenCoordinatorIsPresumedDeadPastTheLimitItsBeatsCarry) {
  CoordinatorWatch watch;
  const Clock::time_point t0{};
  watch.Heard(Beat(5.0), t0);
  EXPECT_TRUE(watch.Judge(t0 + milliseconds(4900)).ok());
  EXPECT_NEAR(watch.UntilPresumedDead(Seconds(60), t0 + seconds(3)).count(), 2.0, 1e-9);
  EXPECT_EQ(watch.UntilPresumedDead(Seconds(60), t0 + seconds(30)).count(), 0.01) << "never below 10 ms";
  const Status st = watch.Judge(t0 + milliseconds(5200));
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), Code::kRankFailed);
  EXPECT_NE(st.message().find("the coordinator (rank 0) has sent nothing for 5.2 s"), std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("timeouts.heartbeat_timeout_seconds = 5"), std::string::npos) << st.message();
}

TEST(CoordinatorWatch, EveryBeatResetsTheSilenceAndCarriesTheLimit) {
  CoordinatorWatch watch;
  const Clock::time_point t0{};
  watch.Heard(Beat(5.0), t0);
  watch.Heard(Beat(5.0), t0 + seconds(4));
  EXPECT_TRUE(watch.Judge(t0 + seconds(8)).ok());
  watch.Heard(Beat(20.0), t0 + seconds(8));  // a later beat may carry a longer limit
  EXPECT_TRUE(watch.Judge(t0 + seconds(27)).ok());
  EXPECT_FALSE(watch.Judge(t0 + seconds(29)).ok());
  EXPECT_EQ(watch.beats(), 3);
}

TEST(CoordinatorWatch, ABeatThatDoesNotDecodeIsIgnored) {
  CoordinatorWatch watch;
  const Clock::time_point t0{};
  Message garbage;
  garbage.source = 0;
  garbage.tag = kTagAlive;
  garbage.bytes = {1, 2, 3};
  watch.Heard(garbage, t0);
  watch.Heard(Beat(0.0), t0);  // no limit: not a beat
  EXPECT_FALSE(watch.heard());
  EXPECT_EQ(watch.beats(), 0);
}

}  // namespace
}  // namespace tessel::workers
