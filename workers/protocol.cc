#include "workers/protocol.h"

#include "core/byte_io.h"

namespace tessel::workers {

namespace {

constexpr uint32_t kMagic = 0x54534c31;  // "TSL1": bump on any layout change

ByteWriter Begin() {
  ByteWriter w;
  w.Put(kMagic);
  return w;
}

void CheckMagic(ByteReader& r) {
  if (r.Get<uint32_t>("magic") != kMagic && r.ok()) {
    r.Fail("protocol message has a foreign magic number: ranks run different builds?");
  }
}

Status Finish(const ByteReader& r) {
  if (!r.ok()) return BadDataError("protocol message: " + r.error());
  return r.done() ? Status() : BadDataError("protocol message has trailing bytes: ranks run different builds?");
}

}  // namespace

std::vector<uint8_t> Encode(const HelloMsg& m) {
  ByteWriter w = Begin();
  w.PutString(m.host);
  w.Put(m.pid);
  w.Put(m.metrics_port);
  return w.Take();
}

Status Decode(const std::vector<uint8_t>& b, HelloMsg* m) {
  ByteReader r(b.data(), b.size());
  CheckMagic(r);
  m->host = r.GetString("host");
  m->pid = r.Get<int64_t>("pid");
  m->metrics_port = r.Get<int32_t>("metrics port");
  return Finish(r);
}

std::vector<uint8_t> Encode(const AssignMsg& m) {
  ByteWriter w = Begin();
  w.PutString(m.job_text);
  w.PutString(m.job_source);
  w.Put<uint64_t>(m.overrides.size());
  for (const auto& o : m.overrides) w.PutString(o);
  w.PutString(m.run_dir);
  w.PutVector(m.partition);
  return w.Take();
}

Status Decode(const std::vector<uint8_t>& b, AssignMsg* m) {
  ByteReader r(b.data(), b.size());
  CheckMagic(r);
  m->job_text = r.GetString("job text");
  m->job_source = r.GetString("job source");
  const uint64_t n = r.Get<uint64_t>("override count");
  // Each override takes at least its 8-byte length: this bounds a corrupt count before allocating.
  if (n > r.remaining() / sizeof(uint64_t)) r.Fail("override count exceeds the message");
  m->overrides.clear();
  for (uint64_t i = 0; r.ok() && i < n; ++i) m->overrides.push_back(r.GetString("override"));
  m->run_dir = r.GetString("run dir");
  m->partition = r.GetVector<uint8_t>("partition");
  return Finish(r);
}

std::vector<uint8_t> Encode(const HeartbeatMsg& m) {
  ByteWriter w = Begin();
  w.Put(m.step);
  return w.Take();
}

Status Decode(const std::vector<uint8_t>& b, HeartbeatMsg* m) {
  ByteReader r(b.data(), b.size());
  CheckMagic(r);
  m->step = r.Get<int64_t>("step");
  return Finish(r);
}

std::vector<uint8_t> Encode(const ProgressMsg& m) {
  ByteWriter w = Begin();
  w.Put(m.epoch);
  w.Put(m.loss);
  w.Put(m.train_accuracy);
  w.Put(m.seconds);
  return w.Take();
}

Status Decode(const std::vector<uint8_t>& b, ProgressMsg* m) {
  ByteReader r(b.data(), b.size());
  CheckMagic(r);
  m->epoch = r.Get<int64_t>("epoch");
  m->loss = r.Get<double>("loss");
  m->train_accuracy = r.Get<double>("train accuracy");
  m->seconds = r.Get<double>("seconds");
  return Finish(r);
}

std::vector<uint8_t> Encode(const ResultMsg& m) {
  ByteWriter w = Begin();
  w.PutVector(m.epoch_loss);
  w.PutVector(m.epoch_seconds);
  w.Put(m.train_accuracy);
  w.Put(m.test_accuracy);
  w.Put(m.test_correct);
  w.Put(m.test_total);
  w.Put(m.peak_rss_bytes);
  w.Put(m.halo_bytes_sent);
  return w.Take();
}

Status Decode(const std::vector<uint8_t>& b, ResultMsg* m) {
  ByteReader r(b.data(), b.size());
  CheckMagic(r);
  m->epoch_loss = r.GetVector<double>("epoch losses");
  m->epoch_seconds = r.GetVector<double>("epoch seconds");
  m->train_accuracy = r.Get<double>("train accuracy");
  m->test_accuracy = r.Get<double>("test accuracy");
  m->test_correct = r.Get<int64_t>("test correct");
  m->test_total = r.Get<int64_t>("test total");
  m->peak_rss_bytes = r.Get<int64_t>("peak rss");
  m->halo_bytes_sent = r.Get<int64_t>("halo bytes");
  return Finish(r);
}

std::vector<uint8_t> Encode(const ErrorMsg& m) {
  ByteWriter w = Begin();
  w.Put(m.code);
  w.Put(m.step);
  w.PutString(m.message);
  return w.Take();
}

Status Decode(const std::vector<uint8_t>& b, ErrorMsg* m) {
  ByteReader r(b.data(), b.size());
  CheckMagic(r);
  m->code = r.Get<int32_t>("code");
  m->step = r.Get<int64_t>("step");
  m->message = r.GetString("message");
  return Finish(r);
}

}  // namespace tessel::workers
