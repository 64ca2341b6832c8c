#include "workers/protocol.h"

#include "core/byte_io.h"

namespace tessel::workers {

namespace {

constexpr uint32_t kMagic = 0x54534c32;  // "TSL2": bump on any layout change

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
  EncodeSettings(m.settings, w);
  w.PutString(m.run_dir);
  w.PutString(m.kind);
  w.PutVector(m.payload);
  w.Put(m.predicted_memory_bytes);
  return w.Take();
}

Status Decode(const std::vector<uint8_t>& b, AssignMsg* m) {
  ByteReader r(b.data(), b.size());
  CheckMagic(r);
  m->settings = DecodeSettings(r);
  m->run_dir = r.GetString("run dir");
  m->kind = r.GetString("kind");
  m->payload = r.GetVector<uint8_t>("payload");
  m->predicted_memory_bytes = r.Get<int64_t>("predicted memory");
  return Finish(r);
}

std::vector<uint8_t> Encode(const HeartbeatMsg& m) {
  ByteWriter w = Begin();
  w.Put(m.step);
  w.PutString(m.activity);
  return w.Take();
}

Status Decode(const std::vector<uint8_t>& b, HeartbeatMsg* m) {
  ByteReader r(b.data(), b.size());
  CheckMagic(r);
  m->step = r.Get<int64_t>("step");
  m->activity = r.GetString("activity");
  return Finish(r);
}

std::vector<uint8_t> Encode(const AliveMsg& m) {
  ByteWriter w = Begin();
  w.Put(m.silence_limit_seconds);
  return w.Take();
}

Status Decode(const std::vector<uint8_t>& b, AliveMsg* m) {
  ByteReader r(b.data(), b.size());
  CheckMagic(r);
  m->silence_limit_seconds = r.Get<double>("silence limit");
  return Finish(r);
}

std::vector<uint8_t> Encode(const StopMsg& m) {
  ByteWriter w = Begin();
  w.Put(m.signal);
  return w.Take();
}

Status Decode(const std::vector<uint8_t>& b, StopMsg* m) {
  ByteReader r(b.data(), b.size());
  CheckMagic(r);
  m->signal = r.Get<int32_t>("signal");
  return Finish(r);
}

std::vector<uint8_t> Encode(const ProgressMsg& m) {
  ByteWriter w = Begin();
  w.Put(m.step);
  w.Put(m.loss);
  w.Put(m.seconds);
  EncodeRecord(m.shown, w);
  EncodeRecord(m.figures, w);
  return w.Take();
}

Status Decode(const std::vector<uint8_t>& b, ProgressMsg* m) {
  ByteReader r(b.data(), b.size());
  CheckMagic(r);
  m->step = r.Get<int64_t>("step");
  m->loss = r.Get<double>("loss");
  m->seconds = r.Get<double>("seconds");
  m->shown = DecodeRecord(r);
  m->figures = DecodeRecord(r);
  return Finish(r);
}

std::vector<uint8_t> Encode(const CheckpointMsg& m) {
  ByteWriter w = Begin();
  w.Put(m.step);
  w.PutVector(m.bytes);
  w.PutVector(m.crc32);
  return w.Take();
}

Status Decode(const std::vector<uint8_t>& b, CheckpointMsg* m) {
  ByteReader r(b.data(), b.size());
  CheckMagic(r);
  m->step = r.Get<int64_t>("step");
  m->bytes = r.GetVector<int64_t>("shard bytes");
  m->crc32 = r.GetVector<int64_t>("shard crc32");
  if (r.ok() && m->bytes.size() != m->crc32.size()) r.Fail("shard lists differ in length");
  return Finish(r);
}

std::vector<uint8_t> Encode(const ResultMsg& m) {
  ByteWriter w = Begin();
  EncodeRecord(m.values, w);
  return w.Take();
}

Status Decode(const std::vector<uint8_t>& b, ResultMsg* m) {
  ByteReader r(b.data(), b.size());
  CheckMagic(r);
  m->values = DecodeRecord(r);
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
