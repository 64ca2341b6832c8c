// SpillStore (storage/spill_store.h): the queue, the I/O thread, the budget and the file's lifetime.
#include "storage/spill_store.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

#include "core/logging.h"
#include "core/safe_file.h"

namespace tessel::storage {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr std::string_view kNoSpaceMarker = "ENOSPC";
constexpr std::string_view kSpillSuffix = ".spill.h5";

double Since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// The pid in "<anything>.<pid>.spill.h5", or -1 when the name is not a spill file's.
pid_t SpillFilePid(const std::string& name) {
  if (name.size() <= kSpillSuffix.size() ||
      name.compare(name.size() - kSpillSuffix.size(), kSpillSuffix.size(), kSpillSuffix) != 0) {
    return -1;
  }
  const std::string stem = name.substr(0, name.size() - kSpillSuffix.size());
  const size_t dot = stem.rfind('.');
  if (dot == std::string::npos || dot + 1 == stem.size() || stem.size() - dot - 1 > 9) return -1;
  pid_t pid = 0;
  for (size_t i = dot + 1; i < stem.size(); ++i) {
    if (stem[i] < '0' || stem[i] > '9') return -1;
    pid = pid * 10 + (stem[i] - '0');
  }
  return pid > 0 ? pid : -1;
}

// Removes the spill files in `dir` whose process no longer exists. A process that exists but belongs to
// someone else (EPERM) keeps its file.
int64_t RemoveStaleFiles(const std::string& dir) {
  int64_t removed = 0;
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, ec)) {
    const pid_t pid = SpillFilePid(entry.path().filename().string());
    if (pid <= 0 || pid == ::getpid()) continue;
    struct stat st {};
    if (::lstat(entry.path().c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::geteuid()) continue;
    if (::kill(pid, 0) == -1 && errno == ESRCH) {
      std::error_code remove_ec;
      if (fs::remove(entry.path(), remove_ec)) ++removed;
    }
  }
  return removed;
}

class SpillStoreImpl final : public SpillStore {
 public:
  SpillStoreImpl(std::unique_ptr<SpillFile> file, const SpillOptions& options, std::string path, bool owns_path)
      : file_(std::move(file)),
        options_(options),
        path_(std::move(path)),
        owns_path_(owns_path),
        label_(path_.empty() ? StrCat(options.dir, "/", options.name) : path_) {
    thread_ = std::thread([this] { Run(); });
  }

  ~SpillStoreImpl() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    work_cv_.notify_one();
    thread_.join();  // the thread drains the queue first
    file_.reset();
    if (owns_path_) {
      std::error_code ec;
      fs::remove(path_, ec);
    }
  }

  Ticket Write(int64_t slot, const void* data, int64_t bytes, std::function<Status()> ready) override {
    return Enqueue(Op{0, Op::kWrite, slot, data, nullptr, bytes, std::move(ready)});
  }
  Ticket Read(int64_t slot, void* data, int64_t bytes, std::function<Status()> ready) override {
    return Enqueue(Op{0, Op::kRead, slot, nullptr, data, bytes, std::move(ready)});
  }
  Ticket Sync() override { return Enqueue(Op{0, Op::kSync, -1, nullptr, nullptr, 0, {}}); }

  Status Wait(Ticket ticket) override {
    const auto t0 = Clock::now();
    std::unique_lock<std::mutex> lock(mu_);
    if (ticket <= 0 || ticket >= next_ticket_) {
      return InternalError(StrCat(label_, ": Wait on unknown spill ticket ", ticket));
    }
    done_cv_.wait(lock, [&] { return completed_ >= ticket; });
    stats_.wait_seconds += Since(t0);
    auto it = results_.find(ticket);
    if (it == results_.end()) return InternalError(StrCat(label_, ": spill ticket ", ticket, " waited for twice"));
    Status status = std::move(it->second);
    results_.erase(it);
    return status;
  }

  bool Done(Ticket ticket) const override {
    std::lock_guard<std::mutex> lock(mu_);
    return ticket >= next_ticket_ || completed_ >= ticket;
  }

  SpillStats stats() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }

  const std::string& path() const override { return path_; }

  void SetStaleFilesRemoved(int64_t n) {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.stale_files_removed = n;
  }

 private:
  struct Op {
    Ticket ticket;
    enum Kind { kWrite, kRead, kSync } kind;
    int64_t slot;
    const void* src;
    void* dst;
    int64_t bytes;
    std::function<Status()> ready;  // run first; the operation waits for it
  };

  Ticket Enqueue(Op op) {
    Ticket ticket = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      ticket = op.ticket = next_ticket_++;
      queue_.push_back(std::move(op));
    }
    work_cv_.notify_one();
    return ticket;
  }

  // The I/O thread: every SpillFile call happens here, in queue order. A write's ticket is done once its
  // bytes are on the disk: while more writes are queued, the file may keep the last ones in flight
  // (SpillFile::InFlight), and their tickets wait, in order, until they are settled; a read, a sync, a
  // write of a slot still in flight, or an empty queue settles them all first.
  void Run() {
    while (true) {
      Op op;
      {
        std::unique_lock<std::mutex> lock(mu_);
        work_cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) break;  // stopping, and nothing left to do
        op = std::move(queue_.front());
        queue_.pop_front();
      }
      const bool rewrites =
          std::any_of(unsettled_.begin(), unsettled_.end(), [&](const Executed& d) { return d.op.slot == op.slot; });
      if (op.kind != Op::kWrite || rewrites) FinishWrites(/*all=*/true);
      // What the operation waits for (a GPU copy into or out of its buffer) is not I/O time.
      Status status = op.ready ? op.ready() : Status::Ok();
      const auto t0 = Clock::now();
      if (status.ok()) status = Execute(op);
      const double seconds = Since(t0);
      if (op.kind != Op::kWrite) {
        Complete(Executed{op, std::move(status), seconds});
        continue;
      }
      unsettled_.push_back(Executed{op, std::move(status), seconds});
      bool more_writes = false;
      {
        std::lock_guard<std::mutex> lock(mu_);
        more_writes = !queue_.empty() && queue_.front().kind == Op::kWrite;
      }
      FinishWrites(/*all=*/!more_writes);
    }
    FinishWrites(/*all=*/true);
  }

  // An operation executed (a write: and settled), with its status and the I/O thread's time in it.
  struct Executed {
    Op op;
    Status status;
    double seconds = 0;
  };

  // Completes the unsettled writes in order: all of them (waiting for the disk), or those no longer in
  // flight up to the first that is.
  void FinishWrites(bool all) {
    while (!unsettled_.empty()) {
      Executed& d = unsettled_.front();
      if (!all && file_->InFlight(d.op.slot)) return;
      const auto t0 = Clock::now();
      Status settled = file_->Settle(d.op.slot);
      d.seconds += Since(t0);
      if (d.status.ok()) d.status = std::move(settled);
      Complete(std::move(d));
      unsettled_.pop_front();
    }
  }

  void Complete(Executed d) {
    const int64_t file_bytes = file_->size_bytes();
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (d.op.kind == Op::kWrite) {
        stats_.write_seconds += d.seconds;
        if (d.status.ok()) stats_.written_bytes += d.op.bytes;
      } else if (d.op.kind == Op::kRead) {
        stats_.read_seconds += d.seconds;
        if (d.status.ok()) stats_.read_bytes += d.op.bytes;
      }
      if (IsNoSpace(d.status)) ++stats_.no_space_errors;
      stats_.file_bytes = file_bytes;
      results_.emplace(d.op.ticket, std::move(d.status));
      completed_ = d.op.ticket;
    }
    done_cv_.notify_all();
  }

  Status Execute(const Op& op) {
    switch (op.kind) {
      case Op::kWrite: {
        auto it = slot_bytes_.find(op.slot);
        const int64_t old_bytes = it == slot_bytes_.end() ? 0 : it->second;
        const int64_t in_use = in_use_bytes_ - old_bytes + op.bytes;
        if (options_.budget_bytes > 0 && op.bytes > old_bytes && in_use > options_.budget_bytes) {
          return NoSpaceError(StrCat(label_, ": slot ", op.slot, ": write of ", op.bytes, " bytes"),
                              StrCat("spill.budget_bytes ", options_.budget_bytes,
                                     " exceeded: ", in_use_bytes_ - old_bytes, " bytes in other slots"));
        }
        TESSEL_RETURN_IF_ERROR(file_->Write(op.slot, op.src, op.bytes));
        slot_bytes_[op.slot] = op.bytes;
        in_use_bytes_ = in_use;
        return Status::Ok();
      }
      case Op::kRead:
        return file_->Read(op.slot, op.dst, op.bytes);
      case Op::kSync:
        return file_->Sync();
    }
    return InternalError("unknown spill operation");
  }

  std::unique_ptr<SpillFile> file_;  // used by the I/O thread only, until it is joined
  const SpillOptions options_;
  const std::string path_;
  const bool owns_path_;
  const std::string label_;  // names the file in messages
  // The I/O thread's own: the size of each slot written, and their sum.
  std::map<int64_t, int64_t> slot_bytes_;
  int64_t in_use_bytes_ = 0;
  std::deque<Executed> unsettled_;  // writes executed but possibly still in flight, in ticket order

  mutable std::mutex mu_;
  std::condition_variable work_cv_;  // the queue has work, or the store is stopping
  std::condition_variable done_cv_;  // completed_ advanced
  std::deque<Op> queue_;
  Ticket next_ticket_ = 1;
  Ticket completed_ = 0;  // operations finish in ticket order: every ticket <= completed_ is done
  std::map<Ticket, Status> results_;
  SpillStats stats_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace

bool IsNoSpace(const Status& status) {
  return status.code() == Code::kStorage && status.message().find(kNoSpaceMarker) != std::string::npos;
}

Status NoSpaceError(std::string_view what, std::string_view why) {
  return StorageError(StrCat(what, ": ", kNoSpaceMarker, " (", why, ")"));
}

std::string SpillDirectory(const std::string& configured) {
  if (!configured.empty()) return configured;
  return StrCat("/tmp/tessel-", ::geteuid(), "/spill");
}

Result<std::unique_ptr<SpillStore>> SpillStore::Open(const SpillOptions& given) {
  SpillOptions options = given;
  options.dir = SpillDirectory(given.dir);
  if (options.name.empty() || options.name.find('/') != std::string::npos) {
    return UsageError(StrCat("spill store: bad file name '", options.name, "' in ", options.dir));
  }
  if (given.dir.empty()) {
    // The default's parent, /tmp/tessel-UID, is Tessel's too: another user who made it first could swap
    // the spill directory under it for a link.
    TESSEL_RETURN_IF_ERROR(EnsurePrivateDirectory(fs::path(options.dir).parent_path().string(), "spill.dir"));
  }
  TESSEL_RETURN_IF_ERROR(EnsurePrivateDirectory(options.dir, "spill.dir"));
  const int64_t stale = RemoveStaleFiles(options.dir);
  const std::string path = StrCat(options.dir, "/", options.name, ".", ::getpid(), kSpillSuffix);
  // Created new with open(2) first (never through a link, never over another file), so that a directory we
  // cannot write to is reported with errno's words; HDF5 then formats the file this process owns.
  {
    Result<FileDescriptor> created = CreateNewFile(path, 0600);
    if (!created.ok()) return StorageError(StrCat("spill.dir: ", created.status().message()));
  }
  std::error_code ec;
  Result<std::unique_ptr<SpillFile>> file = CreateHdf5SpillFile(path, options.checksum);
  if (!file.ok()) {
    fs::remove(path, ec);
    return file.status();
  }
  auto store = std::make_unique<SpillStoreImpl>(std::move(file).value(), options, path, /*owns_path=*/true);
  store->SetStaleFilesRemoved(stale);
  return std::unique_ptr<SpillStore>(std::move(store));
}

std::unique_ptr<SpillStore> SpillStore::WithFile(std::unique_ptr<SpillFile> file, const SpillOptions& options) {
  return std::make_unique<SpillStoreImpl>(std::move(file), options, std::string(), /*owns_path=*/false);
}

}  // namespace tessel::storage
