// Run under mpirun with 2 ranks: a send that times out (SendBytes, workers/comm/mpi_comm.h) is still
// delivered whole when its receiver comes late. Open MPI does not cancel a send, so MPI may read the
// buffer after SendBytes has returned: it must keep it. Rank 0 sends 8 MiB of a pattern with a 20 ms limit
// while rank 1 sleeps, expects "timed out", then frees and scribbles over as much memory again; rank 1
// then receives the message and checks every byte. Then a second send, in time, goes through.
//
//   mpirun -np 2 tessel-send-timeout-check
// Exit 0 when every check passes; 1 with a message naming the rank otherwise.
#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "tests/cluster/two_ranks.h"
#include "workers/comm/mpi_comm.h"

namespace {

using namespace tessel;
using testing::Fail;

constexpr int kTag = 77;
constexpr size_t kBytes = size_t{8} << 20;

uint8_t Pattern(size_t i, int round) { return static_cast<uint8_t>((i * 131 + i / 4096 + round * 7) & 0xff); }

std::vector<uint8_t> Message(int round) {
  std::vector<uint8_t> bytes(kBytes);
  for (size_t i = 0; i < kBytes; ++i) bytes[i] = Pattern(i, round);
  return bytes;
}

int Sender() {
  const Status late = workers::SendBytes(Message(0), 1, kTag, std::chrono::milliseconds(20));
  if (late.ok()) return Fail(0, "a send to a rank that sleeps 1 s finished within 20 ms");
  if (late.message().find("timed out") == std::string::npos) return Fail(0, "unexpected: " + late.ToString());
  // The memory a freed buffer would have gone back to, taken and overwritten.
  std::vector<std::vector<uint8_t>> junk;
  uint64_t sum = 0;
  for (int i = 0; i < 8; ++i) {
    junk.emplace_back(kBytes, static_cast<uint8_t>(0xA5 + i));
    sum += junk.back()[static_cast<size_t>(i) * 4096];
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (sum == 0) return Fail(0, "the scribbled memory reads as zeros");
  const Status sent = workers::SendBytes(Message(1), 1, kTag, std::chrono::seconds(30));
  if (!sent.ok()) return Fail(0, "the second send failed: " + sent.ToString());
  std::printf("rank 0: the first send timed out (%s); the second went through\n", late.message().c_str());
  return 0;
}

int Receiver() {
  std::this_thread::sleep_for(std::chrono::seconds(1));
  for (int round = 0; round < 2; ++round) {
    Result<workers::Message> m = workers::PollMessage(0, kTag, std::chrono::seconds(30));
    if (!m.ok()) return Fail(1, m.status().ToString());
    if (m->source < 0) return Fail(1, "message " + std::to_string(round) + " never came");
    if (m->bytes.size() != kBytes)
      return Fail(1, "message " + std::to_string(round) + " has " + std::to_string(m->bytes.size()) + " bytes");
    for (size_t i = 0; i < kBytes; ++i) {
      if (m->bytes[i] != Pattern(i, round)) {
        return Fail(1, "message " + std::to_string(round) + " differs at byte " + std::to_string(i) +
                           ": the buffer of the send that timed out was freed under MPI");
      }
    }
  }
  std::printf("rank 1: both messages arrived whole (the first after its send had timed out)\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return tessel::testing::RunTwoRanks(argc, argv, &Sender, &Receiver); }
