// Reads and changes checkpoint shards for the tests (storage/checkpoint_shard.h).
//
//   tessel-checkpoint-tool list SHARD.h5      every tensor: NAME NUMEL
//   tessel-checkpoint-tool norms SHARD.h5     every model parameter (param/...): NAME NUMEL L2 PROBE, in
//                                             double, where PROBE is a fixed pseudo-random weighting of its
//                                             values (sum of w_i x_i, w_i in [-0.5, 0.5)): two runs' final
//                                             parameters compared without printing millions of values
//   tessel-checkpoint-tool perturb SHARD.h5   adds 0.01 to element 0 of the first f32 model parameter that
//                                             is not an embedding table, rewrites the shard (temp, fsync,
//                                             rename) and prints "NAME BYTES CRC32" for the caller to put
//                                             into the manifest, so that the checkpoint stays valid
// A perturbed checkpoint tests a resume: one that ignored the checkpoint (started again from step 1, or
// from the initial weights) would give the uncut run's losses. Exit 0, or 1 with a message.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "storage/checkpoint_shard.h"

namespace {

using namespace tessel;

// The executors save their parameters as param/NAME (the optimizer's moments as adam/ or adamw/, the
// runtime's history as runtime/).
bool IsParameter(std::string_view name) { return name.rfind("param/", 0) == 0; }

// An embedding table's element 0 belongs to token 0, which the data may never hold (on a pipeline's first
// stage, whose table the head does not read, changing it would rightly change nothing).
bool IsEmbeddingTable(std::string_view name) { return name == "param/wte" || name == "param/wpe"; }

int Fail(const std::string& what) {
  std::fprintf(stderr, "%s\n", what.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) return Fail(std::string("usage: ") + argv[0] + " list|norms|perturb SHARD.h5");
  const std::string_view mode = argv[1];
  const std::string path = argv[2];
  Result<std::vector<storage::NamedTensor>> read = storage::ReadCheckpointShard(path);
  if (!read.ok()) return Fail(read.status().ToString());
  std::vector<storage::NamedTensor> tensors = std::move(read).value();
  if (mode == "list") {
    for (const storage::NamedTensor& t : tensors)
      std::printf("%s %lld\n", t.name.c_str(), static_cast<long long>(t.tensor.numel()));
    return 0;
  }
  if (mode == "norms") {
    for (const storage::NamedTensor& t : tensors) {
      if (!IsParameter(t.name) || t.tensor.dtype() != DType::kF32) continue;
      const float* x = t.tensor.data<float>();
      double l2 = 0, probe = 0;
      uint64_t state = 0x9E3779B97F4A7C15ull;
      for (int64_t i = 0; i < t.tensor.numel(); ++i) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        const double w = static_cast<double>(state >> 11) * 0x1.0p-53 - 0.5;
        l2 += static_cast<double>(x[i]) * x[i];
        probe += w * x[i];
      }
      std::printf("%s %lld %.17g %.17g\n", t.name.c_str(), static_cast<long long>(t.tensor.numel()), std::sqrt(l2),
                  probe);
    }
    return 0;
  }
  if (mode != "perturb") return Fail("unknown mode " + std::string(mode) + " (list, norms, perturb)");
  storage::NamedTensor* chosen = nullptr;
  for (storage::NamedTensor& t : tensors) {
    if (t.tensor.dtype() == DType::kF32 && t.tensor.numel() > 0 && IsParameter(t.name) && !IsEmbeddingTable(t.name)) {
      chosen = &t;
      break;
    }
  }
  if (chosen == nullptr) return Fail(path + ": no f32 parameter tensor");
  chosen->tensor.data<float>()[0] += 0.01f;
  if (Status st = storage::WriteCheckpointShard(path, tensors); !st.ok()) return Fail(st.ToString());
  Result<storage::FileDigest> digest = storage::DigestFile(path);
  if (!digest.ok()) return Fail(digest.status().ToString());
  std::printf("%s %lld %u\n", chosen->name.c_str(), static_cast<long long>(digest->bytes), digest->crc32);
  return 0;
}
