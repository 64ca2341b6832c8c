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

template <typename M>
std::vector<uint8_t> EncodeMessage(const M& m) {
  ByteWriter w = Begin();
  EncodeFields(m, w);
  return w.Take();
}

template <typename M>
Status DecodeMessage(const std::vector<uint8_t>& b, M* m) {
  ByteReader r(b.data(), b.size());
  CheckMagic(r);
  DecodeFields(*m, r);
  return Finish(r);
}

}  // namespace

#define TESSEL_PROTOCOL_MESSAGE_(Msg)                                    \
  std::vector<uint8_t> Encode(const Msg& m) { return EncodeMessage(m); } \
  Status Decode(const std::vector<uint8_t>& b, Msg* m) { return DecodeMessage(b, m); }
TESSEL_PROTOCOL_MESSAGE_(HelloMsg)
TESSEL_PROTOCOL_MESSAGE_(AssignMsg)
TESSEL_PROTOCOL_MESSAGE_(HeartbeatMsg)
TESSEL_PROTOCOL_MESSAGE_(AliveMsg)
TESSEL_PROTOCOL_MESSAGE_(StopMsg)
TESSEL_PROTOCOL_MESSAGE_(ProgressMsg)
TESSEL_PROTOCOL_MESSAGE_(ResultMsg)
TESSEL_PROTOCOL_MESSAGE_(ErrorMsg)
#undef TESSEL_PROTOCOL_MESSAGE_

std::vector<uint8_t> Encode(const CheckpointMsg& m) { return EncodeMessage(m); }

Status Decode(const std::vector<uint8_t>& b, CheckpointMsg* m) {
  TESSEL_RETURN_IF_ERROR(DecodeMessage(b, m));
  if (m->bytes.size() != m->crc32.size()) return BadDataError("protocol message: shard lists differ in length");
  return Status();
}

}  // namespace tessel::workers
