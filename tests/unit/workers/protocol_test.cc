#include "workers/protocol.h"

#include <gtest/gtest.h>

namespace tessel::workers {
namespace {

TEST(Protocol, AssignRoundTrips) {
  AssignMsg a;
  a.job_text = "version = 1\n";
  a.job_source = "jobs/x.toml";
  a.overrides = {"job.seed=3", "train.lr=0.1"};
  a.run_dir = "runs/x";
  a.partition = {1, 2, 3, 255};
  AssignMsg b;
  ASSERT_TRUE(Decode(Encode(a), &b).ok());
  EXPECT_EQ(b.job_text, a.job_text);
  EXPECT_EQ(b.job_source, a.job_source);
  EXPECT_EQ(b.overrides, a.overrides);
  EXPECT_EQ(b.run_dir, a.run_dir);
  EXPECT_EQ(b.partition, a.partition);
}

TEST(Protocol, ResultAndErrorRoundTrip) {
  ResultMsg r;
  r.epoch_loss = {1.5, 0.25};
  r.epoch_seconds = {0.1, 0.2};
  r.test_accuracy = 0.97;
  r.test_correct = 35;
  r.test_total = 36;
  ResultMsg r2;
  ASSERT_TRUE(Decode(Encode(r), &r2).ok());
  EXPECT_EQ(r2.epoch_loss, r.epoch_loss);
  EXPECT_EQ(r2.test_correct, 35);
  ErrorMsg e{4, 17, "no op"};
  ErrorMsg e2;
  ASSERT_TRUE(Decode(Encode(e), &e2).ok());
  EXPECT_EQ(e2.code, 4);
  EXPECT_EQ(e2.step, 17);
  EXPECT_EQ(e2.message, "no op");
}

TEST(Protocol, EveryTruncationIsBadDataNeverACrash) {
  AssignMsg a;
  a.job_text = "abc";
  a.overrides = {"x=1"};
  a.partition = std::vector<uint8_t>(40, 7);
  const auto bytes = Encode(a);
  for (size_t n = 0; n < bytes.size(); ++n) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + static_cast<long>(n));
    AssignMsg out;
    Status st = Decode(cut, &out);
    ASSERT_FALSE(st.ok()) << "prefix of " << n << " bytes decoded";
    EXPECT_EQ(st.code(), Code::kBadData);
  }
}

TEST(Protocol, ForeignMagicIsRefused) {
  auto bytes = Encode(HeartbeatMsg{3});
  bytes[0] ^= 0xff;
  HeartbeatMsg h;
  EXPECT_EQ(Decode(bytes, &h).code(), Code::kBadData);
}

}  // namespace
}  // namespace tessel::workers
