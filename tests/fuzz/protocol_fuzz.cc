// libFuzzer target: the decoders of the coordinator <-> worker messages (workers/protocol.h).
// The first input byte picks the message type (modulo the number of types), the rest is the message.
// A decode may fail, but a message it accepts must round-trip: re-encoding it gives back the bytes it
// was decoded from (every value has one encoding, so a corrupt byte cannot pass as another value), and
// those bytes decode again to a message that encodes the same.
//
// Seeds: `protocol_fuzz --write-seeds=DIR` writes one encoded message of each type (tests/fuzz/README.md).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_util.h"
#include "workers/protocol.h"

namespace tessel::workers {
namespace {

[[noreturn]] void Fail(const char* type, const std::string& what) {
  std::fprintf(stderr, "protocol_fuzz: %s: %s\n", type, what.c_str());
  std::abort();
}

std::string FirstDifference(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  return StrCat("decoded ", a.size(), " bytes, re-encoded ", b.size(), "; they first differ at byte ", i);
}

template <typename Msg>
void RoundTrip(const char* type, const std::vector<uint8_t>& bytes) {
  Msg decoded;
  if (!Decode(bytes, &decoded).ok()) return;
  const std::vector<uint8_t> encoded = Encode(decoded);
  Msg again;
  const Status st = Decode(encoded, &again);
  if (!st.ok()) Fail(type, "the re-encoded message does not decode: " + st.ToString());
  if (Encode(again) != encoded) Fail(type, "decode(encode(m)) encodes differently from m");
  if (encoded != bytes) Fail(type, "an accepted message re-encodes to other bytes: " + FirstDifference(bytes, encoded));
}

using RoundTripFn = void (*)(const char*, const std::vector<uint8_t>&);
struct MessageType {
  const char* name;
  RoundTripFn round_trip;
};
constexpr MessageType kTypes[] = {
    {"HelloMsg", RoundTrip<HelloMsg>},
    {"AssignMsg", RoundTrip<AssignMsg>},
    {"HeartbeatMsg", RoundTrip<HeartbeatMsg>},
    {"AliveMsg", RoundTrip<AliveMsg>},
    {"StopMsg", RoundTrip<StopMsg>},
    {"ProgressMsg", RoundTrip<ProgressMsg>},
    {"ResultMsg", RoundTrip<ResultMsg>},
    {"ErrorMsg", RoundTrip<ErrorMsg>},
    {"CheckpointMsg", RoundTrip<CheckpointMsg>},
};
constexpr size_t kNumTypes = sizeof(kTypes) / sizeof(kTypes[0]);

// ---- seeds ------------------------------------------------------------------------------------------

Record SeedRecord() {
  Record nested;
  Set(nested, "edge_cut", int64_t{80263});
  Record r;
  Set(r, "epoch_loss", std::vector<double>{1.5, 0.25});
  Set(r, "test_accuracy", 0.97);
  Set(r, "device", "cpu");
  Set(r, "converged", true);
  Set(r, "partition", nested);
  Set(r, "curve", NumberRows{{{1, 0.5}, {2, 0.25}}});
  return r;
}

WorkerSettings SeedSettings() {
  WorkerSettings s;
  s.job_name = "rgcn-aifb";
  s.seed = 7;
  s.log_level = LogLevel::kWarn;
  s.threads = 3;
  s.device = DeviceChoice::kCpu;
  s.memory_budget_bytes = int64_t{1} << 33;
  s.plugin_paths = {"/opt/a.so"};
  s.plugin_search_dirs = {"/opt/plugins"};
  s.plugin_prefer = {"example"};
  s.metrics_bind = "0.0.0.0";
  s.metrics_port_base = 9400;
  s.heartbeat_interval_seconds = 0.5;
  s.step_timeout_seconds = 30;
  s.startup_timeout_seconds = 45;
  s.checkpoint_dir = "runs/x/checkpoints";
  s.checkpoint_every_steps = 10;
  s.kernel_sample_every = 10;
  s.resume_step = -1;
  return s;
}

void WriteSeed(const std::string& dir, size_t type, const std::vector<uint8_t>& message) {
  const std::string path = StrCat(dir, "/", kTypes[type].name);
  std::ofstream out(path, std::ios::binary);
  const char selector = static_cast<char>(type);
  out.write(&selector, 1);
  out.write(reinterpret_cast<const char*>(message.data()), static_cast<std::streamsize>(message.size()));
  if (!out) Fail(kTypes[type].name, "cannot write seed " + path);
}

void WriteSeeds(const std::string& dir) {
  WriteSeed(dir, 0, Encode(HelloMsg{"node7", 4242, 9402}));
  WriteSeed(dir, 1, Encode(AssignMsg{SeedSettings(), "runs/x", "rgnn.full", {1, 2, 3, 255}}));
  WriteSeed(dir, 2, Encode(HeartbeatMsg{12, "in kernel nn.gemm (cpu) for 1.5 s"}));
  WriteSeed(dir, 3, Encode(AliveMsg{10.0}));
  WriteSeed(dir, 4, Encode(StopMsg{10}));
  WriteSeed(dir, 5, Encode(ProgressMsg{3, 0.693, 1.25, SeedRecord(), SeedRecord()}));
  WriteSeed(dir, 6, Encode(ResultMsg{SeedRecord()}));
  WriteSeed(dir, 7, Encode(ErrorMsg{3, 17, "bad data: x.h5: /nodes/entity/count: negative count -1"}));
  WriteSeed(dir, 8, Encode(CheckpointMsg{20, {4096, 8192}, {0x1234, 0xabcd}}));
}

}  // namespace
}  // namespace tessel::workers

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  tessel::fuzz::WriteSeedsIfAsked(*argc, *argv, tessel::workers::WriteSeeds);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using tessel::workers::kNumTypes;
  using tessel::workers::kTypes;
  if (size == 0) return 0;
  const auto& type = kTypes[data[0] % kNumTypes];
  type.round_trip(type.name, std::vector<uint8_t>(data + 1, data + size));
  return 0;
}
