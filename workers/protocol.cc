#include "workers/protocol.h"

namespace tessel::workers {

void ByteWriter::PutString(const std::string& s) {
  Put<uint64_t>(s.size());
  Append(s.data(), s.size());
}

Status ByteReader::GetString(std::string* s) {
  uint64_t n = 0;
  TESSEL_RETURN_IF_ERROR(Get(&n));
  if (n > size_ - pos_) return Truncated();
  s->assign(reinterpret_cast<const char*>(data_ + pos_), n);
  pos_ += n;
  return Status();
}

namespace {
constexpr uint32_t kMagic = 0x54534c31;  // "TSL1": bump on any layout change

ByteWriter Begin() {
  ByteWriter w;
  w.Put(kMagic);
  return w;
}

Status Check(ByteReader& r) {
  uint32_t magic = 0;
  TESSEL_RETURN_IF_ERROR(r.Get(&magic));
  if (magic != kMagic) return BadDataError("protocol message has a foreign magic number: ranks run different builds?");
  return Status();
}

Status Finish(const ByteReader& r) {
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
  TESSEL_RETURN_IF_ERROR(Check(r));
  TESSEL_RETURN_IF_ERROR(r.GetString(&m->host));
  TESSEL_RETURN_IF_ERROR(r.Get(&m->pid));
  TESSEL_RETURN_IF_ERROR(r.Get(&m->metrics_port));
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
  TESSEL_RETURN_IF_ERROR(Check(r));
  TESSEL_RETURN_IF_ERROR(r.GetString(&m->job_text));
  TESSEL_RETURN_IF_ERROR(r.GetString(&m->job_source));
  uint64_t n = 0;
  TESSEL_RETURN_IF_ERROR(r.Get(&n));
  if (n > b.size()) return BadDataError("protocol message: implausible override count");
  m->overrides.resize(n);
  for (auto& o : m->overrides) TESSEL_RETURN_IF_ERROR(r.GetString(&o));
  TESSEL_RETURN_IF_ERROR(r.GetString(&m->run_dir));
  TESSEL_RETURN_IF_ERROR(r.GetVector(&m->partition));
  return Finish(r);
}

std::vector<uint8_t> Encode(const HeartbeatMsg& m) {
  ByteWriter w = Begin();
  w.Put(m.step);
  return w.Take();
}

Status Decode(const std::vector<uint8_t>& b, HeartbeatMsg* m) {
  ByteReader r(b.data(), b.size());
  TESSEL_RETURN_IF_ERROR(Check(r));
  TESSEL_RETURN_IF_ERROR(r.Get(&m->step));
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
  TESSEL_RETURN_IF_ERROR(Check(r));
  TESSEL_RETURN_IF_ERROR(r.Get(&m->epoch));
  TESSEL_RETURN_IF_ERROR(r.Get(&m->loss));
  TESSEL_RETURN_IF_ERROR(r.Get(&m->train_accuracy));
  TESSEL_RETURN_IF_ERROR(r.Get(&m->seconds));
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
  TESSEL_RETURN_IF_ERROR(Check(r));
  TESSEL_RETURN_IF_ERROR(r.GetVector(&m->epoch_loss));
  TESSEL_RETURN_IF_ERROR(r.GetVector(&m->epoch_seconds));
  TESSEL_RETURN_IF_ERROR(r.Get(&m->train_accuracy));
  TESSEL_RETURN_IF_ERROR(r.Get(&m->test_accuracy));
  TESSEL_RETURN_IF_ERROR(r.Get(&m->test_correct));
  TESSEL_RETURN_IF_ERROR(r.Get(&m->test_total));
  TESSEL_RETURN_IF_ERROR(r.Get(&m->peak_rss_bytes));
  TESSEL_RETURN_IF_ERROR(r.Get(&m->halo_bytes_sent));
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
  TESSEL_RETURN_IF_ERROR(Check(r));
  TESSEL_RETURN_IF_ERROR(r.Get(&m->code));
  TESSEL_RETURN_IF_ERROR(r.Get(&m->step));
  TESSEL_RETURN_IF_ERROR(r.GetString(&m->message));
  return Finish(r);
}

}  // namespace tessel::workers
