// The spill files for tests (storage/spill_store.h): slots in memory, and a wrapper that injects faults.
#include <cstring>
#include <map>
#include <utility>
#include <vector>

#include "core/logging.h"
#include "storage/spill_store.h"

namespace tessel::storage {
namespace {

class MemorySpillFile final : public SpillFile {
 public:
  Status Write(int64_t slot, const void* data, int64_t bytes) override {
    if (bytes < 0) return InternalError(StrCat("memory spill: slot ", slot, ": bad write of ", bytes, " bytes"));
    std::vector<uint8_t>& s = slots_[slot];
    const auto* p = static_cast<const uint8_t*>(data);
    s.assign(p, p + bytes);
    return Status::Ok();
  }
  Status Read(int64_t slot, void* data, int64_t bytes) override {
    auto it = slots_.find(slot);
    if (it == slots_.end()) return InternalError(StrCat("memory spill: slot ", slot, ": read of a slot never written"));
    if (static_cast<int64_t>(it->second.size()) != bytes) {
      return InternalError(
          StrCat("memory spill: slot ", slot, ": read of ", bytes, " bytes, but the slot holds ", it->second.size()));
    }
    if (bytes > 0) std::memcpy(data, it->second.data(), static_cast<size_t>(bytes));
    return Status::Ok();
  }
  Status Sync() override { return Status::Ok(); }
  int64_t size_bytes() const override {
    int64_t total = 0;
    for (const auto& [slot, bytes] : slots_) total += static_cast<int64_t>(bytes.size());
    return total;
  }

 private:
  std::map<int64_t, std::vector<uint8_t>> slots_;
};

class FaultySpillFile final : public SpillFile {
 public:
  FaultySpillFile(std::unique_ptr<SpillFile> base, SpillFaultPlan plan) : base_(std::move(base)), plan_(plan) {}

  Status Write(int64_t slot, const void* data, int64_t bytes) override {
    ++writes_;
    if (plan_.fault == SpillFault::kCorruptRead || !Fires(writes_)) return base_->Write(slot, data, bytes);
    const std::string where = StrCat("faulty spill: slot ", slot);
    switch (plan_.fault) {
      case SpillFault::kNoSpace:
        return NoSpaceError(StrCat(where, ": write"), "No space left on device (injected)");
      case SpillFault::kIoError:
        return StorageError(StrCat(where, ": write: Input/output error (injected)"));
      case SpillFault::kShortWrite: {
        // Half the bytes reach the file, as a write cut short by the kernel would leave it.
        (void)base_->Write(slot, data, bytes / 2);
        return StorageError(StrCat(where, ": short write: ", bytes / 2, " of ", bytes, " bytes (injected)"));
      }
      default:
        return base_->Write(slot, data, bytes);
    }
  }

  // A corrupt read flips bytes of the data and fails as the HDF5 file with a checksum would: the caller
  // sees kStorage "checksum mismatch", never the wrong bytes as if they were right.
  Status Read(int64_t slot, void* data, int64_t bytes) override {
    ++reads_;
    Status st = base_->Read(slot, data, bytes);
    if (!st.ok() || plan_.fault != SpillFault::kCorruptRead || !Fires(reads_)) return st;
    auto* p = static_cast<uint8_t*>(data);
    for (int64_t i = 0; i < bytes; i += 4096) p[i] ^= 0xff;
    return StorageError(StrCat("faulty spill: slot ", slot, ": checksum mismatch (injected corruption)"));
  }

  Status Sync() override { return base_->Sync(); }
  bool InFlight(int64_t slot) const override { return base_->InFlight(slot); }
  Status Settle(int64_t slot) override { return base_->Settle(slot); }
  int64_t size_bytes() const override { return base_->size_bytes(); }

 private:
  bool Fires(int64_t count) const {
    if (plan_.fault == SpillFault::kNone || plan_.at_operation <= 0) return false;
    return plan_.persistent ? count >= plan_.at_operation : count == plan_.at_operation;
  }

  std::unique_ptr<SpillFile> base_;
  const SpillFaultPlan plan_;
  int64_t writes_ = 0;
  int64_t reads_ = 0;
};

}  // namespace

std::unique_ptr<SpillFile> NewMemorySpillFile() { return std::make_unique<MemorySpillFile>(); }

std::unique_ptr<SpillFile> NewFaultySpillFile(std::unique_ptr<SpillFile> base, SpillFaultPlan plan) {
  return std::make_unique<FaultySpillFile>(std::move(base), plan);
}

}  // namespace tessel::storage
