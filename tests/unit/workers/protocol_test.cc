// The coordinator <-> worker messages: every field of every message survives a round trip, and bad
// bytes are refused as bad data, never read out of bounds.
#include "workers/protocol.h"

#include <gtest/gtest.h>

namespace tessel::workers {
namespace {

WorkerSettings FullSettings() {
  WorkerSettings s;
  s.job_name = "rgcn-aifb";
  s.seed = 7;
  s.log_level = LogLevel::kWarn;
  s.threads = 3;
  s.device = DeviceChoice::kCuda;
  s.memory_budget_bytes = int64_t{1} << 33;
  s.plugin_paths = {"/opt/a.so", "/opt/b.so"};
  s.plugin_search_dirs = {"/opt/plugins"};
  s.metrics_bind = "0.0.0.0";
  s.metrics_port_base = 9400;
  s.heartbeat_interval_seconds = 0.5;
  s.step_timeout_seconds = 30;
  s.startup_timeout_seconds = 45;
  return s;
}

Record FullRecord() {
  Record nested;
  Set(nested, "edge_cut", int64_t{80263});
  Record r;
  Set(r, "epoch_loss", std::vector<double>{1.5, 0.25});
  Set(r, "test_accuracy", 0.97);
  Set(r, "test_correct", int64_t{35});
  Set(r, "device", "cpu");
  Set(r, "converged", true);
  Set(r, "partition", nested);
  return r;
}

TEST(Protocol, AssignRoundTripsEveryField) {
  AssignMsg a;
  a.settings = FullSettings();
  a.run_dir = "runs/x";
  a.kind = "rgnn.full";
  a.payload = {1, 2, 3, 255};
  a.predicted_memory_bytes = int64_t{3} << 40;
  AssignMsg b;
  ASSERT_TRUE(Decode(Encode(a), &b).ok());
  EXPECT_EQ(b.settings, a.settings);
  EXPECT_EQ(b.run_dir, a.run_dir);
  EXPECT_EQ(b.kind, a.kind);
  EXPECT_EQ(b.payload, a.payload);
  EXPECT_EQ(b.predicted_memory_bytes, a.predicted_memory_bytes);
}

TEST(Protocol, HelloHeartbeatProgressResultAndErrorRoundTrip) {
  HelloMsg h{"node7", 4242, 9402}, h2;
  ASSERT_TRUE(Decode(Encode(h), &h2).ok());
  EXPECT_EQ(h2.host, "node7");
  EXPECT_EQ(h2.pid, 4242);
  EXPECT_EQ(h2.metrics_port, 9402);

  HeartbeatMsg hb{17, "in kernel nn.relu.fwd (cpu) for 3.0 s"}, hb2;
  ASSERT_TRUE(Decode(Encode(hb), &hb2).ok());
  EXPECT_EQ(hb2.step, 17);
  EXPECT_EQ(hb2.activity, "in kernel nn.relu.fwd (cpu) for 3.0 s");

  AliveMsg alive{7.5}, alive2;
  ASSERT_TRUE(Decode(Encode(alive), &alive2).ok());
  EXPECT_EQ(alive2.silence_limit_seconds, 7.5);

  StopMsg stop{10}, stop2;
  ASSERT_TRUE(Decode(Encode(stop), &stop2).ok());
  EXPECT_EQ(stop2.signal, 10);

  Record figures;
  Set(figures, "compute_seconds", 0.125);
  ProgressMsg p{12, 0.5, 0.25, FullRecord(), figures}, p2;
  ASSERT_TRUE(Decode(Encode(p), &p2).ok());
  EXPECT_EQ(p2.step, 12);
  EXPECT_EQ(p2.loss, 0.5);
  EXPECT_EQ(p2.seconds, 0.25);
  ASSERT_EQ(p2.shown.size(), p.shown.size());
  EXPECT_EQ(FindNumber(p2.figures, "compute_seconds"), 0.125);

  const ResultMsg r{FullRecord()};
  ResultMsg r2;
  ASSERT_TRUE(Decode(Encode(r), &r2).ok());
  ASSERT_EQ(r2.values.size(), r.values.size());
  for (size_t i = 0; i < r.values.size(); ++i) EXPECT_EQ(r2.values[i].name, r.values[i].name);
  EXPECT_EQ(std::get<std::vector<double>>(Find(r2.values, "epoch_loss")->data), (std::vector<double>{1.5, 0.25}));
  EXPECT_EQ(FindNumber(r2.values, "test_accuracy"), 0.97);
  EXPECT_EQ(FindNumber(r2.values, "test_correct"), 35);
  EXPECT_EQ(std::get<std::string>(Find(r2.values, "device")->data), "cpu");
  EXPECT_EQ(std::get<bool>(Find(r2.values, "converged")->data), true);
  EXPECT_EQ(FindNumber(std::get<Record>(Find(r2.values, "partition")->data), "edge_cut"), 80263);

  ErrorMsg e{4, 17, "no op"}, e2;
  ASSERT_TRUE(Decode(Encode(e), &e2).ok());
  EXPECT_EQ(e2.code, 4);
  EXPECT_EQ(e2.step, 17);
  EXPECT_EQ(e2.message, "no op");
}

TEST(Protocol, EveryTruncationIsBadDataNeverACrash) {
  AssignMsg a;
  a.settings = FullSettings();
  a.kind = "rgnn.full";
  a.payload = std::vector<uint8_t>(40, 7);
  const std::vector<uint8_t> assign = Encode(a);
  for (size_t n = 0; n < assign.size(); ++n) {
    AssignMsg out;
    const Status st = Decode(std::vector<uint8_t>(assign.begin(), assign.begin() + static_cast<long>(n)), &out);
    ASSERT_FALSE(st.ok()) << "assignment prefix of " << n << " bytes decoded";
    EXPECT_EQ(st.code(), Code::kBadData);
  }
  const std::vector<uint8_t> result = Encode(ResultMsg{FullRecord()});
  for (size_t n = 0; n < result.size(); ++n) {
    ResultMsg out;
    const Status st = Decode(std::vector<uint8_t>(result.begin(), result.begin() + static_cast<long>(n)), &out);
    ASSERT_FALSE(st.ok()) << "result prefix of " << n << " bytes decoded";
    EXPECT_EQ(st.code(), Code::kBadData);
  }
}

TEST(Protocol, OutOfRangeEnumsAndTrailingBytesAreRefused) {
  AssignMsg a;
  a.settings = FullSettings();
  std::vector<uint8_t> bytes = Encode(a);
  bytes.push_back(0);
  AssignMsg b;
  EXPECT_EQ(Decode(bytes, &b).code(), Code::kBadData);
  // An enum out of its range; a value only the job's rules forbid (threads = 0) is not the decoder's to
  // refuse (jobs/validate.cc owns it).
  a.settings.device = static_cast<DeviceChoice>(ChoiceCount<DeviceChoice>());
  const Status st = Decode(Encode(a), &b);
  EXPECT_EQ(st.code(), Code::kBadData);
  EXPECT_NE(st.message().find("settings.device = 3 is not one of its 3 values"), std::string::npos) << st.message();
  a.settings = FullSettings();
  a.settings.threads = 0;
  EXPECT_TRUE(Decode(Encode(a), &b).ok());
}

TEST(Protocol, ForeignMagicIsRefused) {
  auto bytes = Encode(HeartbeatMsg{3, ""});
  bytes[0] ^= 0xff;
  HeartbeatMsg h;
  EXPECT_EQ(Decode(bytes, &h).code(), Code::kBadData);
}

}  // namespace
}  // namespace tessel::workers
