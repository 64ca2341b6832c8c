// Run under mpirun with 2 ranks: a message past 2^31 bytes, which MPI's int counts cannot name, goes
// through SendBytes and TryReceive (workers/comm/mpi_comm.h) whole. Rank 0 sends 2 GiB + 4097 bytes of a
// pattern; rank 1 takes it with TryReceive and a `between` callback (the path a worker's multi-GB
// assignment takes), checks the size, that `between` ran, and every byte; then it sends the size it got
// back, and rank 0 checks it.
//
//   mpirun -np 2 tessel-big-message-check
// Exit 0 when every check passes; 1 with a message naming the rank otherwise.
#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "tests/cluster/two_ranks.h"
#include "workers/comm/mpi_comm.h"

namespace {

using namespace tessel;
using testing::Fail;

constexpr int kTag = 78;
constexpr size_t kBytes = (size_t{1} << 31) + 4097;  // past INT_MAX, and not a whole number of pieces

uint8_t Pattern(size_t i) { return static_cast<uint8_t>((i * 131 + (i >> 20) * 7 + (i >> 31)) & 0xff); }

int Sender() {
  std::vector<uint8_t> bytes(kBytes);
  for (size_t i = 0; i < kBytes; ++i) bytes[i] = Pattern(i);
  const auto start = std::chrono::steady_clock::now();
  const Status sent = workers::SendBytes(std::move(bytes), 1, kTag, std::chrono::seconds(120));
  if (!sent.ok()) return Fail(0, "the send failed: " + sent.ToString());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  Result<workers::Message> ack = workers::PollMessage(1, kTag, std::chrono::seconds(120));
  if (!ack.ok() || ack->source < 0 || ack->bytes.size() != sizeof(uint64_t))
    return Fail(0, "no acknowledgement from rank 1");
  uint64_t got = 0;
  std::memcpy(&got, ack->bytes.data(), sizeof got);
  if (got != kBytes) return Fail(0, "rank 1 got " + std::to_string(got) + " bytes of " + std::to_string(kBytes));
  std::printf("rank 0: sent %zu bytes (2^31 + 4097) in one message in %.1f s; rank 1 got all of them\n", kBytes,
              seconds);
  return 0;
}

int Receiver() {
  int64_t between = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  Result<workers::Message> m = workers::Message{};
  while (std::chrono::steady_clock::now() < deadline) {
    m = workers::TryReceive(0, kTag, [&between] { ++between; });
    if (!m.ok()) return Fail(1, m.status().ToString());
    if (m->source >= 0) break;
  }
  if (m->source < 0) return Fail(1, "the message never came");
  if (m->bytes.size() != kBytes)
    return Fail(1, "the message has " + std::to_string(m->bytes.size()) + " bytes, expected " + std::to_string(kBytes));
  for (size_t i = 0; i < kBytes; ++i) {
    if (m->bytes[i] != Pattern(i)) return Fail(1, "the message differs at byte " + std::to_string(i));
  }
  if (between == 0) return Fail(1, "the receive never called `between` while the message arrived");
  std::vector<uint8_t> ack(sizeof(uint64_t));
  const uint64_t size = m->bytes.size();
  std::memcpy(ack.data(), &size, sizeof size);
  m->bytes = {};
  const Status st = workers::SendBytes(std::move(ack), 0, kTag, std::chrono::seconds(60));
  if (!st.ok()) return Fail(1, "the acknowledgement failed: " + st.ToString());
  std::printf("rank 1: received %zu bytes whole, every byte checked (between ran %lld times)\n", size,
              static_cast<long long>(between));
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return tessel::testing::RunTwoRanks(argc, argv, &Sender, &Receiver); }
