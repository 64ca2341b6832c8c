// Checkpoint shards (DESIGN.md "Checkpoints"): one HDF5 file per worker per checkpoint, holding the
// named host tensors that the worker's executor saved (parameters, optimizer moments, counters) and the
// runtime's per-step history. Every dataset carries a Fletcher32 checksum, so a shard damaged on disk is
// detected when it is read, and the whole file's CRC-32 goes into the coordinator's manifest so a resume
// can reject a damaged checkpoint before any worker starts.
//
//   TESSEL_RETURN_IF_ERROR(WriteCheckpointShard(dir + "/worker-0.h5", tensors));  // temp name, fsync, rename
//   TESSEL_ASSIGN_OR_RETURN(std::vector<NamedTensor> back, ReadCheckpointShard(dir + "/worker-0.h5"));
//
// Layout: attributes /format = "tessel-checkpoint-shard" and /format_version = 1; one dataset per tensor
// at /tensors/<name> ('/' in a name makes groups), of its dtype (f32, f64, i32, i64, u8) and shape.
// Thread safety: free functions; HDF5 is serialised by its own lock. Failure: kStorage naming the file
// (and the tensor): a write that cannot complete (the temporary is removed, the old file is untouched),
// and on read a missing, truncated or corrupt file or a checksum mismatch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"

namespace tessel::storage {

struct NamedTensor {
  std::string name;
  Tensor tensor;  // host memory
};

Status WriteCheckpointShard(const std::string& path, const std::vector<NamedTensor>& tensors);
Result<std::vector<NamedTensor>> ReadCheckpointShard(const std::string& path);

// The CRC-32 (zlib's) of a whole file and its size.
struct FileDigest {
  int64_t bytes = 0;
  uint32_t crc32 = 0;
};
Result<FileDigest> DigestFile(const std::string& path);

// Where checkpoint `step` lives under a checkpoint directory, and worker `worker`'s shard in it.
std::string CheckpointStepDir(const std::string& dir, int64_t step);           // DIR/step-<step>
std::string CheckpointShardPath(const std::string& step_dir, int32_t worker);  // STEP_DIR/worker-<w>.h5

}  // namespace tessel::storage
