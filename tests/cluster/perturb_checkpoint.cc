// Changes one parameter of a checkpoint shard and keeps the checkpoint valid, so that a resume from it
// must train on from the changed value: a resume that ignored the checkpoint (started again from step 0,
// or from the initial weights) would give the uncut run's losses, and the test would see it.
//
//   tessel-perturb-checkpoint SHARD.h5 [--list]
// Adds 0.01 to element 0 of the shard's first f32 model parameter (param/...,
// not an embedding table), rewrites the shard
// (storage/checkpoint_shard.h: temp, fsync, rename), and prints "NAME BYTES CRC32" for the caller to put
// into the manifest. --list prints every tensor's name.
// Exit 0, or 1 with a message.
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "storage/checkpoint_shard.h"

namespace {

using namespace tessel;

// The executors save their parameters as param/NAME (the optimizer's moments as adam/ or adamw/, the
// runtime's history as runtime/). An embedding table is passed over: its element 0 belongs to token 0,
// which the data may never hold (on a pipeline's first stage, whose table the head does not read, such a
// change would rightly change nothing).
bool IsParameter(std::string_view name) {
  return name.rfind("param/", 0) == 0 && name != "param/wte" && name != "param/wpe";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s SHARD.h5 [--list]\n", argv[0]);
    return 1;
  }
  const std::string path = argv[1];
  Result<std::vector<storage::NamedTensor>> read = storage::ReadCheckpointShard(path);
  if (!read.ok()) {
    std::fprintf(stderr, "%s\n", read.status().ToString().c_str());
    return 1;
  }
  std::vector<storage::NamedTensor> tensors = std::move(read).value();
  if (argc > 2 && std::string_view(argv[2]) == "--list") {
    for (const storage::NamedTensor& t : tensors) std::printf("%s %lld\n", t.name.c_str(), static_cast<long long>(t.tensor.numel()));
    return 0;
  }
  storage::NamedTensor* chosen = nullptr;
  for (storage::NamedTensor& t : tensors) {
    if (t.tensor.dtype() == DType::kF32 && t.tensor.numel() > 0 && IsParameter(t.name)) {
      chosen = &t;
      break;
    }
  }
  if (chosen == nullptr) {
    std::fprintf(stderr, "%s: no f32 parameter tensor\n", path.c_str());
    return 1;
  }
  chosen->tensor.data<float>()[0] += 0.01f;
  if (Status st = storage::WriteCheckpointShard(path, tensors); !st.ok()) {
    std::fprintf(stderr, "%s\n", st.ToString().c_str());
    return 1;
  }
  Result<storage::FileDigest> digest = storage::DigestFile(path);
  if (!digest.ok()) {
    std::fprintf(stderr, "%s\n", digest.status().ToString().c_str());
    return 1;
  }
  std::printf("%s %lld %u\n", chosen->name.c_str(), static_cast<long long>(digest->bytes), digest->crc32);
  return 0;
}
