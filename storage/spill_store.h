// SpillStore: one worker's activation spill file (DESIGN.md "Spill store"). Saved activations are written
// to numbered slots and read back later; one I/O thread owns the file (HDF5 is not thread-safe), so Write
// and Read only queue the work and return a ticket, and Wait blocks until that operation is done.
//
//   TESSEL_ASSIGN_OR_RETURN(auto store, SpillStore::Open({dir, "job-w0", /*checksum=*/true, 0}));
//   SpillStore::Ticket w = store->Write(slot, acts.data(), bytes);   // compute goes on meanwhile
//   TESSEL_RETURN_IF_ERROR(store->Wait(w));                          // acts may be reused from here
//   SpillStore::Ticket r = store->Read(slot, acts.data(), bytes);    // prefetch, ahead of use
//   Status st = store->Wait(r);  // IsNoSpace(st): keep or recompute instead; other errors: exit 6
//
// Slots are rewritten in place when reused with the same size, so the file stays bounded from step to
// step. The file is removed when the store is destroyed; Open removes the stale files of dead processes.
// Under the store, the file operations go through SpillFile (STYLE.md "Put I/O behind an interface, with
// fakes"): HDF5 on disk, memory, or a wrapper that injects faults.
//
// Ownership: the store owns its file and its thread; the buffers passed to Write/Read are the caller's
// and must stay valid (and, for Write, unchanged) until Wait returns for that ticket.
// Thread safety: Write/Read/Wait/stats from one thread (the training thread); the I/O thread is internal.
// Failure: kStorage naming the file and the slot. A full disk (ENOSPC, or the store's budget_bytes) is
// kStorage with IsNoSpace(status) true, so the caller can fall back; a Fletcher32 mismatch on read is
// kStorage saying "checksum", never wrong numbers.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "core/status.h"

namespace tessel::storage {

// The file operations under a SpillStore. Called from one thread at a time (the store's I/O thread).
class SpillFile {
 public:
  virtual ~SpillFile() = default;
  // Writes `bytes` bytes as slot `slot`; a slot rewritten with the same size is overwritten in place.
  // The bytes may still be on their way to the disk when Write returns (copied: `data` is free again);
  // InFlight says so, and Settle waits for them and returns how they went.
  virtual Status Write(int64_t slot, const void* data, int64_t bytes) = 0;
  // Whether some of `slot`'s written bytes are still on their way to the disk.
  virtual bool InFlight(int64_t slot) const {
    (void)slot;
    return false;
  }
  // Waits until no write of `slot` is in flight; returns the first failure of its writes since its last
  // Settle (OK if none). Files that write before Write returns keep these defaults.
  virtual Status Settle(int64_t slot) {
    (void)slot;
    return Status::Ok();
  }
  // Reads slot `slot` (exactly `bytes` bytes, as written) into `data`.
  virtual Status Read(int64_t slot, void* data, int64_t bytes) = 0;
  // Makes every write so far durable (H5Fflush + fsync for a file on disk).
  virtual Status Sync() = 0;
  virtual int64_t size_bytes() const = 0;
};

// HDF5 on disk (storage/spill_hdf5.cc): one 1-D uint8 dataset "/slots/<n>" per slot, in chunks of up to
// 4 MiB allocated when the slot is first written, Fletcher32 when `checksum`. The chunks are written and
// read in place with O_DIRECT (buffered where the filesystem refuses it); chunks copied through a bounce
// buffer (a checksum, an unaligned caller buffer, a partial last chunk) are double-buffered, and the last
// two may still be in flight when Write returns (InFlight, Settle). A slot rewritten with another size is
// deleted and created again (HDF5 reuses the freed space). Creates or truncates `path`.
// Failure: kStorage naming the path (and slot); a full disk is IsNoSpace; a Fletcher32 mismatch on Read
// is kStorage "<path>: slot <n>: checksum mismatch ..."; HDF5's error stack is never printed.
Result<std::unique_ptr<SpillFile>> CreateHdf5SpillFile(const std::string& path, bool checksum);
// Memory: for tests of the layers above. Reading a slot never written, or with another size, is kInternal.
std::unique_ptr<SpillFile> NewMemorySpillFile();

// Faults for tests: the n-th write (1-based; 0 = never) fails, or a read returns corrupted bytes.
// kNoSpace: IsNoSpace. kIoError: kStorage, not no-space. kShortWrite: half the bytes reach the base file,
// kStorage "short write". kCorruptRead: the bytes read are flipped and the read fails with kStorage
// "checksum mismatch", as the HDF5 file with a checksum does (a corrupt read is always detected).
enum class SpillFault { kNone, kNoSpace, kIoError, kShortWrite, kCorruptRead };
struct SpillFaultPlan {
  SpillFault fault = SpillFault::kNone;
  int64_t at_operation = 1;  // the write (or, for kCorruptRead, the read) that fails, 1-based
  bool persistent = true;    // every later one fails too
};
std::unique_ptr<SpillFile> NewFaultySpillFile(std::unique_ptr<SpillFile> base, SpillFaultPlan plan);

// Totals since Open.
struct SpillStats {
  int64_t written_bytes = 0;
  int64_t read_bytes = 0;
  double write_seconds = 0;  // I/O thread time in writes
  double read_seconds = 0;   // I/O thread time in reads
  double wait_seconds = 0;   // training thread time blocked in Wait
  int64_t file_bytes = 0;    // current file size
  int64_t no_space_errors = 0;
  int64_t stale_files_removed = 0;  // by Open: spill files of dead processes
};

// Where spill files go: `configured` ([spill] dir) when set, else this user's own /tmp/tessel-<uid>/spill
// (a directory shared by every user, like the old /tmp/tessel-spill, let anyone plant links there).
std::string SpillDirectory(const std::string& configured);

struct SpillOptions {
  std::string dir;           // [spill] dir ("" = SpillDirectory's default): created 0700 if missing
  std::string name;          // the file name stem, unique per worker of a job, e.g. "<job>-w3"
  bool checksum = false;     // [spill] checksum: Fletcher32 on every slot
  int64_t budget_bytes = 0;  // [spill] budget_bytes: a write past it fails as no space; 0 = unlimited
};

class SpillStore {
 public:
  using Ticket = int64_t;

  // Creates the directory (SpillDirectory(dir)) with mode 0700 if missing, or checks that it is this user's
  // and writable by no one else (core/safe_file.h), and that it is writable (kStorage naming the directory
  // otherwise, so a job can fail before training starts); removes stale spill files there whose process is
  // gone (regular files of this user only: never a link); creates "<dir>/<name>.<pid>.spill.h5" as a new
  // file (a name already taken, a planted symbolic link included, is kStorage naming it, never
  // followed) and starts the I/O thread.
  static Result<std::unique_ptr<SpillStore>> Open(const SpillOptions& options);
  // Over a given file (memory, faults); options.dir and name only label messages, path() is "", and no
  // file is removed.
  static std::unique_ptr<SpillStore> WithFile(std::unique_ptr<SpillFile> file, const SpillOptions& options);

  virtual ~SpillStore() = default;  // finishes queued work, stops the thread, removes the file

  // Queue a write of `bytes` bytes from `data` to `slot`, or a read of `slot` into `data`. `ready`, when
  // given, runs on the I/O thread first and the operation waits for it (a GPU worker waits there for the
  // device -> pinned host copy that fills `data`, or for the last copy out of `data` before it is read
  // into); its failure is the operation's, which then does not touch the file.
  virtual Ticket Write(int64_t slot, const void* data, int64_t bytes, std::function<Status()> ready = {}) = 0;
  virtual Ticket Read(int64_t slot, void* data, int64_t bytes, std::function<Status()> ready = {}) = 0;
  // Queue a Sync of the file: once Wait returns OK for it, every write queued before it is on the disk.
  virtual Ticket Sync() = 0;
  // Blocks until the operation is done and returns its status (once per ticket: a second Wait, or a
  // ticket never issued, is kInternal). Operations run in queue order; an error fails only its own
  // ticket. The store keeps each result until its Wait, so a caller waits for every ticket.
  virtual Status Wait(Ticket ticket) = 0;
  // Whether Wait(ticket) would return at once.
  virtual bool Done(Ticket ticket) const = 0;
  virtual SpillStats stats() const = 0;
  virtual const std::string& path() const = 0;
};

// A full disk or the budget: the caller keeps the tensor in memory or recomputes it. True exactly for a
// kStorage status whose message carries the marker "ENOSPC", which every no-space error of the spill code
// carries (NoSpaceError).
bool IsNoSpace(const Status& status);
// The no-space error, for SpillFile implementations: kStorage "<what>: ENOSPC (<why>)".
Status NoSpaceError(std::string_view what, std::string_view why);

}  // namespace tessel::storage
