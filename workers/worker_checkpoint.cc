#include "workers/worker_checkpoint.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/file_descriptor.h"
#include "core/safe_file.h"

namespace tessel::workers {

Status WriteCheckpoint(const WorkerSettings& settings, const Executor& executor, const StepHistory& history,
                       int64_t step, WorkerComm& comm, const std::function<Status(const CheckpointMsg&)>& on_checkpoint,
                       const Logger& log) {
  const std::string dir = storage::CheckpointStepDir(settings.checkpoint_dir, step);
  // A planted link at step-K would carry the shards elsewhere: refused, as is a directory another user owns.
  TESSEL_RETURN_IF_ERROR(CheckNotSymlink(dir));
  TESSEL_RETURN_IF_ERROR(EnsurePrivateDirectory(dir, "checkpoint.dir"));
  ShardState state;
  TESSEL_RETURN_IF_ERROR(executor.SaveState(state));
  TESSEL_RETURN_IF_ERROR(history.Save(state));
  const std::string path = storage::CheckpointShardPath(dir, comm.rank());
  TESSEL_RETURN_IF_ERROR(storage::WriteCheckpointShard(path, state.tensors()));
  TESSEL_ASSIGN_OR_RETURN(storage::FileDigest digest, storage::DigestFile(path));
  const auto n = static_cast<size_t>(comm.size());
  std::vector<int64_t> figures(2 * n, 0);
  figures[static_cast<size_t>(comm.rank())] = digest.bytes;
  figures[n + static_cast<size_t>(comm.rank())] = digest.crc32;
  TESSEL_RETURN_IF_ERROR(comm.AllreduceSum(figures.data(), static_cast<int64_t>(figures.size())));
  log.Debug(StrCat("checkpoint shard ", path, ": ", digest.bytes, " bytes"));
  if (comm.rank() != 0 || !on_checkpoint) return Status();
  CheckpointMsg m;
  m.step = step;
  m.bytes.assign(figures.begin(), figures.begin() + static_cast<std::ptrdiff_t>(n));
  m.crc32.assign(figures.begin() + static_cast<std::ptrdiff_t>(n), figures.end());
  return on_checkpoint(m);
}

Status CheckCheckpointDir(const WorkerSettings& settings, int rank) {
  if (settings.checkpoint_every_steps <= 0) return Status();
  const std::string& dir = settings.checkpoint_dir;
  TESSEL_RETURN_IF_ERROR(EnsurePrivateDirectory(dir, "checkpoint.dir"));
  const std::string probe = StrCat(dir, "/.write-check.", rank, ".", ::getpid());
  auto created = CreateNewFile(probe, 0600);
  if (!created.ok())
    return StorageError(StrCat("checkpoint.dir: cannot write into ", dir, ": ", created.status().message()));
  FileDescriptor fd = std::move(created).value();
  const bool written = ::write(fd.get(), "tessel\n", 7) == 7 && fd.Close() == 0;
  const int e = errno;
  ::unlink(probe.c_str());
  if (!written) return StorageError(StrCat("checkpoint.dir: cannot write into ", dir, ": ", std::strerror(e)));
  return Status();
}

}  // namespace tessel::workers
