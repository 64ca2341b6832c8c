// The spill store (storage/spill_store.*): the HDF5 file on disk, the fakes, the queue and its errors.
#include "storage/spill_store.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "test_util.h"

namespace tessel::storage {
namespace {

using ::testing::HasSubstr;
using testing::ScratchDir;

constexpr int64_t kMiB = int64_t{1} << 20;

// Bytes that differ from slot to slot and from offset to offset.
std::vector<uint8_t> Pattern(int64_t bytes, uint32_t seed) {
  std::vector<uint8_t> v(static_cast<size_t>(bytes));
  uint32_t x = seed * 2654435761u + 1;
  for (auto& b : v) {
    x = x * 1664525u + 1013904223u;
    b = static_cast<uint8_t>(x >> 24);
  }
  return v;
}

// A 4 KiB-aligned copy, for the direct-I/O path that writes whole chunks straight from the caller.
struct AlignedBuffer {
  explicit AlignedBuffer(const std::vector<uint8_t>& bytes) : size(bytes.size()) {
    void* p = nullptr;
    EXPECT_EQ(posix_memalign(&p, 4096, std::max<size_t>(size, 1)), 0);
    data = static_cast<uint8_t*>(p);
    if (size > 0) std::memcpy(data, bytes.data(), size);  // an empty vector's data() may be null
  }
  ~AlignedBuffer() { std::free(data); }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  uint8_t* data = nullptr;
  size_t size = 0;
};

SpillOptions Options(const ScratchDir& dir, bool checksum = false, int64_t budget = 0) {
  return SpillOptions{dir.path().string(), "job-w0", checksum, budget};
}

std::unique_ptr<SpillStore> OpenOrDie(const SpillOptions& options) {
  Result<std::unique_ptr<SpillStore>> store = SpillStore::Open(options);
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  return store.ok() ? std::move(store).value() : nullptr;
}

Status WriteNow(SpillStore& store, int64_t slot, const std::vector<uint8_t>& bytes) {
  return store.Wait(store.Write(slot, bytes.data(), static_cast<int64_t>(bytes.size())));
}

Result<std::vector<uint8_t>> ReadNow(SpillStore& store, int64_t slot, int64_t bytes) {
  std::vector<uint8_t> out(static_cast<size_t>(bytes), 0xAB);
  TESSEL_RETURN_IF_ERROR(store.Wait(store.Read(slot, out.data(), bytes)));
  return out;
}

// Sizes that cover one small chunk, exactly one full chunk (with and without the checksum's 4 bytes), a
// partial last chunk, and several chunks.
const std::vector<int64_t> kSizes = {1, 100, 4096, 4 * kMiB - 4, 4 * kMiB, 9 * kMiB + 123, 16 * kMiB, 0};

TEST(SpillStore, RoundTripsManySlotsThroughHdf5) {
  for (bool checksum : {false, true}) {
    SCOPED_TRACE(checksum ? "checksum on" : "checksum off");
    ScratchDir dir;
    std::unique_ptr<SpillStore> store = OpenOrDie(Options(dir, checksum));
    ASSERT_NE(store, nullptr);
    std::vector<std::vector<uint8_t>> data;
    std::vector<SpillStore::Ticket> tickets;
    for (size_t i = 0; i < kSizes.size(); ++i) data.push_back(Pattern(kSizes[i], static_cast<uint32_t>(i)));
    // The checksum's edge cases: all zero bytes (its sums stay 0) and all 0xff (its sums fold to 65535).
    data[3].assign(data[3].size(), 0x00);
    data[5].assign(data[5].size(), 0xff);
    for (size_t i = 0; i < kSizes.size(); ++i) {
      tickets.push_back(store->Write(static_cast<int64_t>(i), data[i].data(), kSizes[i]));
    }
    // The same bytes again from aligned buffers, in slots of their own: whole chunks go out without a copy.
    std::vector<std::unique_ptr<AlignedBuffer>> aligned;
    for (size_t i = 0; i < kSizes.size(); ++i) {
      aligned.push_back(std::make_unique<AlignedBuffer>(data[i]));
      tickets.push_back(store->Write(static_cast<int64_t>(100 + i), aligned.back()->data, kSizes[i]));
    }
    tickets.push_back(store->Sync());
    for (SpillStore::Ticket t : tickets) ASSERT_TRUE(store->Wait(t).ok());
    for (size_t i = 0; i < kSizes.size(); ++i) {
      for (int64_t slot : {static_cast<int64_t>(i), static_cast<int64_t>(100 + i)}) {
        Result<std::vector<uint8_t>> back = ReadNow(*store, slot, kSizes[i]);
        ASSERT_TRUE(back.ok()) << back.status().ToString();
        EXPECT_TRUE(*back == data[i]) << "slot " << slot << " (" << kSizes[i] << " bytes) came back different";
        // Into an aligned buffer: without a checksum whole chunks come back with O_DIRECT, straight in.
        AlignedBuffer into(std::vector<uint8_t>(data[i].size(), 0xCD));
        ASSERT_TRUE(store->Wait(store->Read(slot, into.data, kSizes[i])).ok());
        EXPECT_TRUE(data[i].empty() || std::memcmp(into.data, data[i].data(), data[i].size()) == 0)
            << "slot " << slot << " (aligned read)";
      }
    }
    const SpillStats stats = store->stats();
    int64_t total = 0;
    for (int64_t s : kSizes) total += s;
    EXPECT_EQ(stats.written_bytes, 2 * total);
    EXPECT_EQ(stats.read_bytes, 4 * total);  // each slot read twice: into a vector, then aligned
    EXPECT_GE(stats.file_bytes, 2 * total);
    EXPECT_EQ(stats.no_space_errors, 0);
  }
}

TEST(SpillStore, ResizedSlotRoundTrips) {
  ScratchDir dir;
  std::unique_ptr<SpillStore> store = OpenOrDie(Options(dir, /*checksum=*/true));
  ASSERT_NE(store, nullptr);
  for (int64_t bytes : std::vector<int64_t>{6 * kMiB, 100, 0, 3 * kMiB + 5}) {
    const std::vector<uint8_t> data = Pattern(bytes, static_cast<uint32_t>(bytes));
    ASSERT_TRUE(WriteNow(*store, 7, data).ok());
    Result<std::vector<uint8_t>> back = ReadNow(*store, 7, bytes);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_TRUE(*back == data) << bytes << " bytes";
  }
}

TEST(SpillStore, SlotReuseKeepsFileBounded) {
  ScratchDir dir;
  std::unique_ptr<SpillStore> store = OpenOrDie(Options(dir, /*checksum=*/true));
  ASSERT_NE(store, nullptr);
  auto step = [&](uint32_t seed) {
    for (int64_t slot = 0; slot < 4; ++slot) {
      ASSERT_TRUE(WriteNow(*store, slot, Pattern(5 * kMiB + slot, seed + static_cast<uint32_t>(slot))).ok());
    }
    ASSERT_TRUE(store->Wait(store->Sync()).ok());
  };
  step(1);
  const int64_t after_first = store->stats().file_bytes;
  EXPECT_GE(after_first, 4 * 5 * kMiB);
  for (uint32_t s = 2; s < 12; ++s) step(s);
  EXPECT_EQ(store->stats().file_bytes, after_first);
  EXPECT_EQ(static_cast<int64_t>(std::filesystem::file_size(store->path())), after_first);
  Result<std::vector<uint8_t>> back = ReadNow(*store, 3, 5 * kMiB + 3);
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(*back == Pattern(5 * kMiB + 3, 11 + 3));
}

// Finds `needle` in the file with plain reads; -1 when absent.
int64_t FindInFile(const std::string& path, const std::vector<uint8_t>& needle) {
  const std::string bytes = testing::ReadBytes(path);
  const size_t at = bytes.find(std::string(needle.begin(), needle.end()));
  return at == std::string::npos ? -1 : static_cast<int64_t>(at);
}

TEST(SpillStore, ChecksumDetectsCorruptionOnDisk) {
  ScratchDir dir;
  std::unique_ptr<SpillStore> store = OpenOrDie(Options(dir, /*checksum=*/true));
  ASSERT_NE(store, nullptr);
  const std::vector<uint8_t> data = Pattern(6 * kMiB, 42);
  ASSERT_TRUE(WriteNow(*store, 3, data).ok());
  ASSERT_TRUE(store->Wait(store->Sync()).ok());
  ASSERT_TRUE(ReadNow(*store, 3, 6 * kMiB).ok());

  // 64 bytes from the middle of the second chunk: unique in a file of pseudo-random bytes.
  const std::vector<uint8_t> needle(data.begin() + 5 * kMiB, data.begin() + 5 * kMiB + 64);
  const int64_t at = FindInFile(store->path(), needle);
  ASSERT_GE(at, 0) << "the slot's bytes are not in the file as written";
  const int fd = ::open(store->path().c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  const uint8_t flipped = static_cast<uint8_t>(needle[10] ^ 0x01);
  ASSERT_EQ(::pwrite(fd, &flipped, 1, at + 10), 1);
  ::close(fd);

  ::testing::internal::CaptureStderr();
  Result<std::vector<uint8_t>> back = ReadNow(*store, 3, 6 * kMiB);
  const std::string stderr_text = ::testing::internal::GetCapturedStderr();
  ASSERT_FALSE(back.ok()) << "a flipped byte on disk was read back without an error";
  EXPECT_EQ(back.status().code(), Code::kStorage);
  EXPECT_THAT(back.status().message(), HasSubstr("checksum"));
  EXPECT_THAT(back.status().message(), HasSubstr(store->path()));
  EXPECT_THAT(back.status().message(), HasSubstr("slot 3"));
  EXPECT_FALSE(IsNoSpace(back.status()));
  EXPECT_EQ(stderr_text, "") << "HDF5 printed its error stack";
}

std::unique_ptr<SpillStore> FaultyStore(SpillFaultPlan plan, int64_t budget = 0) {
  return SpillStore::WithFile(NewFaultySpillFile(NewMemorySpillFile(), plan),
                              SpillOptions{"mem", "job-w0", false, budget});
}

TEST(SpillStore, EnospcFromFakeIsNoSpace) {
  std::unique_ptr<SpillStore> store = FaultyStore({SpillFault::kNoSpace, 2, /*persistent=*/false});
  const std::vector<uint8_t> data = Pattern(1000, 1);
  EXPECT_TRUE(WriteNow(*store, 0, data).ok());
  const Status st = WriteNow(*store, 1, data);
  EXPECT_EQ(st.code(), Code::kStorage);
  EXPECT_TRUE(IsNoSpace(st)) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr("slot 1"));
  EXPECT_TRUE(WriteNow(*store, 2, data).ok()) << "a fault planned once fired again";
  EXPECT_EQ(store->stats().no_space_errors, 1);
  EXPECT_EQ(store->stats().written_bytes, 2000);
}

TEST(SpillStore, PersistentFaultKeepsFailing) {
  std::unique_ptr<SpillStore> store = FaultyStore({SpillFault::kNoSpace, 2, /*persistent=*/true});
  const std::vector<uint8_t> data = Pattern(10, 1);
  EXPECT_TRUE(WriteNow(*store, 0, data).ok());
  for (int64_t slot = 1; slot < 4; ++slot) EXPECT_TRUE(IsNoSpace(WriteNow(*store, slot, data)));
  EXPECT_EQ(store->stats().no_space_errors, 3);
}

TEST(SpillStore, BudgetExceededIsNoSpace) {
  std::unique_ptr<SpillStore> store = FaultyStore({}, /*budget=*/10000);
  EXPECT_TRUE(WriteNow(*store, 0, Pattern(6000, 1)).ok());
  const Status st = WriteNow(*store, 1, Pattern(6000, 2));
  EXPECT_TRUE(IsNoSpace(st)) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr("budget"));
  EXPECT_EQ(store->stats().file_bytes, 6000) << "the refused write touched the file";
  EXPECT_TRUE(WriteNow(*store, 0, Pattern(6000, 3)).ok()) << "rewriting a slot in place needs no new space";
  EXPECT_TRUE(WriteNow(*store, 1, Pattern(4000, 4)).ok()) << "exactly the budget fits";
  EXPECT_TRUE(IsNoSpace(WriteNow(*store, 1, Pattern(4001, 4)))) << "growing a slot past the budget";
  EXPECT_TRUE(WriteNow(*store, 0, Pattern(10, 5)).ok()) << "shrinking is always allowed";
  EXPECT_TRUE(WriteNow(*store, 1, Pattern(4001, 4)).ok()) << "the space a slot gave back is free again";
}

TEST(SpillStore, BudgetAppliesToTheHdf5Store) {
  ScratchDir dir;
  std::unique_ptr<SpillStore> store = OpenOrDie(Options(dir, false, /*budget=*/kMiB));
  ASSERT_NE(store, nullptr);
  EXPECT_TRUE(WriteNow(*store, 0, Pattern(kMiB / 2, 1)).ok());
  EXPECT_TRUE(IsNoSpace(WriteNow(*store, 1, Pattern(kMiB / 2 + 1, 2))));
}

TEST(SpillStore, IoErrorIsNotNoSpace) {
  std::unique_ptr<SpillStore> store = FaultyStore({SpillFault::kIoError, 1, true});
  const Status st = WriteNow(*store, 5, Pattern(10, 1));
  EXPECT_EQ(st.code(), Code::kStorage);
  EXPECT_FALSE(IsNoSpace(st)) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr("slot 5"));
  EXPECT_EQ(store->stats().no_space_errors, 0);
}

TEST(SpillStore, ShortWriteIsAStorageError) {
  std::unique_ptr<SpillStore> store = FaultyStore({SpillFault::kShortWrite, 1, true});
  const Status st = WriteNow(*store, 0, Pattern(100, 1));
  EXPECT_EQ(st.code(), Code::kStorage);
  EXPECT_THAT(st.message(), HasSubstr("short write"));
  EXPECT_FALSE(IsNoSpace(st));
}

TEST(SpillStore, CorruptReadFromFakeIsChecksumError) {
  std::unique_ptr<SpillStore> store = FaultyStore({SpillFault::kCorruptRead, 2, /*persistent=*/false});
  const std::vector<uint8_t> data = Pattern(10000, 1);
  ASSERT_TRUE(WriteNow(*store, 0, data).ok());
  EXPECT_TRUE(ReadNow(*store, 0, 10000).ok());
  Result<std::vector<uint8_t>> corrupt = ReadNow(*store, 0, 10000);
  ASSERT_FALSE(corrupt.ok());
  EXPECT_EQ(corrupt.status().code(), Code::kStorage);
  EXPECT_THAT(corrupt.status().message(), HasSubstr("checksum mismatch"));
  Result<std::vector<uint8_t>> again = ReadNow(*store, 0, 10000);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(*again == data);
}

TEST(SpillStore, NoSpaceMarkerIsTheOnlyTest) {
  EXPECT_TRUE(IsNoSpace(NoSpaceError("f: slot 1: write", "No space left on device")));
  EXPECT_FALSE(IsNoSpace(StorageError("f: slot 1: write: Input/output error")));
  EXPECT_FALSE(IsNoSpace(InternalError("ENOSPC in another layer")));
  EXPECT_FALSE(IsNoSpace(Status::Ok()));
}

TEST(SpillStore, UnwritableDirIsStorageError) {
  ScratchDir dir;
  const std::string file = dir.File("plain-file");
  testing::WriteText(file, "not a directory");
  const std::string spill_dir = file + "/sub";
  Result<std::unique_ptr<SpillStore>> store = SpillStore::Open({spill_dir, "job-w0", false, 0});
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), Code::kStorage);
  EXPECT_EQ(store.status().message(), "spill.dir: cannot create " + spill_dir + ": Not a directory");
}

// Issue 32: symbolic links planted at the names of the next spill files made a run overwrite their target.
TEST(SpillStore, APlantedLinkAtTheSpillFileIsRefusedAndItsTargetUntouched) {
  ScratchDir dir;
  const std::string victim = dir.File("victim.txt");
  testing::WriteText(victim, "precious");
  const std::string spill_dir = dir.File("spill");
  ASSERT_EQ(::mkdir(spill_dir.c_str(), 0700), 0);
  const std::string planted = spill_dir + "/job-w0." + std::to_string(::getpid()) + ".spill.h5";
  ASSERT_EQ(::symlink(victim.c_str(), planted.c_str()), 0);
  Result<std::unique_ptr<SpillStore>> store = SpillStore::Open({spill_dir, "job-w0", false, 0});
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), Code::kStorage);
  EXPECT_NE(store.status().message().find(planted), std::string::npos) << store.status().message();
  EXPECT_NE(store.status().message().find("a symbolic link to " + victim), std::string::npos);
  std::ifstream in(victim);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "precious");
  EXPECT_TRUE(std::filesystem::is_symlink(planted));  // not removed as a stale file either
}

TEST(SpillStore, ADirectoryOthersCanWriteIsRefused) {
  ScratchDir dir;
  const std::string spill_dir = dir.File("shared");
  ASSERT_EQ(::mkdir(spill_dir.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(spill_dir.c_str(), 01777), 0);  // as /tmp/tessel-spill, shared by every user, was
  Result<std::unique_ptr<SpillStore>> store = SpillStore::Open({spill_dir, "job-w0", false, 0});
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), Code::kStorage);
  EXPECT_NE(store.status().message().find("writable by every user"), std::string::npos) << store.status().message();
}

TEST(SpillStore, TheDefaultDirectoryIsThisUsersOwn) {
  EXPECT_EQ(SpillDirectory(""), "/tmp/tessel-" + std::to_string(::geteuid()) + "/spill");
  EXPECT_EQ(SpillDirectory("/nvme/x"), "/nvme/x");
}

TEST(SpillStore, StaleFilesOfDeadProcessesAreRemoved) {
  ScratchDir dir;
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) ::_exit(0);
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);  // reaped: its pid names no process now
  const std::string dead = "job-w1." + std::to_string(child) + ".spill.h5";
  const std::string alive = "job-w2." + std::to_string(::getppid()) + ".spill.h5";
  for (const std::string& name : {dead, alive, std::string("notes.spill.h5"), std::string("other.txt")}) {
    testing::WriteText(dir.File(name), "x");
  }
  std::unique_ptr<SpillStore> store = OpenOrDie(Options(dir));
  ASSERT_NE(store, nullptr);
  EXPECT_FALSE(std::filesystem::exists(dir.File(dead)));
  EXPECT_TRUE(std::filesystem::exists(dir.File(alive)));
  EXPECT_TRUE(std::filesystem::exists(dir.File("notes.spill.h5")));
  EXPECT_TRUE(std::filesystem::exists(dir.File("other.txt")));
  EXPECT_EQ(store->stats().stale_files_removed, 1);
  EXPECT_EQ(store->path(), dir.File("job-w0." + std::to_string(::getpid()) + ".spill.h5"));
}

TEST(SpillStore, FileRemovedOnDestroy) {
  ScratchDir dir;
  std::unique_ptr<SpillStore> store = OpenOrDie(Options(dir));
  ASSERT_NE(store, nullptr);
  const std::string path = store->path();
  ASSERT_TRUE(std::filesystem::exists(path));
  const std::vector<uint8_t> data = Pattern(kMiB, 1);
  store->Write(0, data.data(), kMiB);  // queued, never waited for: the destructor finishes it
  store.reset();
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_EQ(dir.List(), std::vector<std::string>{});
}

// A file whose writes wait until the test opens the gate, and that counts what it did.
class GatedFile final : public SpillFile {
 public:
  struct Shared {
    std::mutex mu;
    std::condition_variable cv;
    bool open = false;
    int writes_started = 0;
    std::atomic<int> writes_done{0};
    void Open() {
      {
        std::lock_guard<std::mutex> lock(mu);
        open = true;
      }
      cv.notify_all();
    }
    void WaitForWriteStarted() {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return writes_started > 0; });
    }
  };
  explicit GatedFile(std::shared_ptr<Shared> shared) : shared_(std::move(shared)) {}
  Status Write(int64_t slot, const void* data, int64_t bytes) override {
    {
      std::unique_lock<std::mutex> lock(shared_->mu);
      ++shared_->writes_started;
      shared_->cv.notify_all();
      shared_->cv.wait(lock, [&] { return shared_->open; });
    }
    Status st = memory_->Write(slot, data, bytes);
    ++shared_->writes_done;
    return st;
  }
  Status Read(int64_t slot, void* data, int64_t bytes) override { return memory_->Read(slot, data, bytes); }
  Status Sync() override { return Status::Ok(); }
  int64_t size_bytes() const override { return memory_->size_bytes(); }

 private:
  std::shared_ptr<Shared> shared_;
  std::unique_ptr<SpillFile> memory_ = NewMemorySpillFile();
};

TEST(SpillStore, OperationsOverlapCompute) {
  auto shared = std::make_shared<GatedFile::Shared>();
  std::unique_ptr<SpillStore> store =
      SpillStore::WithFile(std::make_unique<GatedFile>(shared), SpillOptions{"mem", "job-w0", false, 0});
  const std::vector<uint8_t> data = Pattern(4096, 1);
  const SpillStore::Ticket w = store->Write(0, data.data(), 4096);  // returns with the write still pending
  std::vector<uint8_t> out(4096);
  const SpillStore::Ticket r = store->Read(0, out.data(), 4096);
  shared->WaitForWriteStarted();
  EXPECT_FALSE(store->Done(w));
  EXPECT_FALSE(store->Done(r));
  // "Compute" on the training thread while the I/O thread is inside the write.
  int64_t sum = 0;
  for (uint8_t b : data) sum += b;
  EXPECT_GT(sum, 0);
  EXPECT_EQ(shared->writes_done.load(), 0);
  shared->Open();
  EXPECT_TRUE(store->Wait(r).ok());
  EXPECT_TRUE(store->Done(w)) << "operations finish in queue order";
  EXPECT_TRUE(store->Wait(w).ok());
  EXPECT_TRUE(out == data);
  EXPECT_GE(store->stats().wait_seconds, 0.0);
}

TEST(SpillStore, ErrorOfOneTicketDoesNotPoisonLater) {
  std::unique_ptr<SpillStore> store = FaultyStore({SpillFault::kIoError, 2, /*persistent=*/false});
  const std::vector<uint8_t> a = Pattern(100, 1), b = Pattern(100, 2), c = Pattern(100, 3);
  const SpillStore::Ticket t1 = store->Write(1, a.data(), 100);
  const SpillStore::Ticket t2 = store->Write(2, b.data(), 100);
  const SpillStore::Ticket t3 = store->Write(3, c.data(), 100);
  EXPECT_TRUE(store->Wait(t3).ok());
  EXPECT_FALSE(store->Wait(t2).ok());
  EXPECT_TRUE(store->Wait(t1).ok());
  Result<std::vector<uint8_t>> back = ReadNow(*store, 3, 100);
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(*back == c);
  EXPECT_TRUE(WriteNow(*store, 2, b).ok());
}

// A file that leaves every write in flight until its slot is settled, and fails the writes of one slot
// only when they settle, as the HDF5 file's background chunk writes can.
class DeferredFile final : public SpillFile {
 public:
  explicit DeferredFile(int64_t failing_slot) : base_(NewMemorySpillFile()), failing_slot_(failing_slot) {}
  Status Write(int64_t slot, const void* data, int64_t bytes) override {
    in_flight_.insert(slot);
    return base_->Write(slot, data, bytes);
  }
  Status Read(int64_t slot, void* data, int64_t bytes) override { return base_->Read(slot, data, bytes); }
  Status Sync() override { return base_->Sync(); }
  int64_t size_bytes() const override { return base_->size_bytes(); }
  bool InFlight(int64_t slot) const override { return in_flight_.count(slot) > 0; }
  Status Settle(int64_t slot) override {
    std::lock_guard<std::mutex> lock(mu_);
    settled_.push_back(slot);
    if (in_flight_.erase(slot) == 0) return Status::Ok();
    return slot == failing_slot_ ? StorageError("slot 2: write: Input/output error") : Status::Ok();
  }
  std::vector<int64_t> settled() const {
    std::lock_guard<std::mutex> lock(mu_);
    return settled_;
  }

 private:
  std::unique_ptr<SpillFile> base_;
  const int64_t failing_slot_;
  std::set<int64_t> in_flight_;
  mutable std::mutex mu_;
  std::vector<int64_t> settled_;
};

// A write's ticket is done only once its bytes have settled, and a failure that shows only then fails
// that write's ticket and no other.
TEST(SpillStore, WritesInFlightFinishWhenSettledAndFailOnlyTheirTicket) {
  auto owned = std::make_unique<DeferredFile>(/*failing_slot=*/2);
  DeferredFile* file = owned.get();
  std::unique_ptr<SpillStore> store = SpillStore::WithFile(std::move(owned), SpillOptions{"mem", "job-w0", false, 0});
  const std::vector<uint8_t> a = Pattern(100, 1), b = Pattern(100, 2), c = Pattern(100, 3);
  const SpillStore::Ticket t1 = store->Write(1, a.data(), 100);
  const SpillStore::Ticket t2 = store->Write(2, b.data(), 100);
  const SpillStore::Ticket t3 = store->Write(3, c.data(), 100);
  EXPECT_TRUE(store->Wait(t1).ok());
  const std::vector<int64_t> settled = file->settled();
  EXPECT_NE(std::find(settled.begin(), settled.end(), 1), settled.end()) << "ticket 1 done before slot 1 settled";
  const Status failed = store->Wait(t2);
  EXPECT_EQ(failed.code(), Code::kStorage);
  EXPECT_THAT(failed.message(), HasSubstr("slot 2"));
  EXPECT_TRUE(store->Wait(t3).ok());
  const SpillStats stats = store->stats();
  EXPECT_EQ(stats.written_bytes, 200) << "the failed write's bytes are not counted";
  Result<std::vector<uint8_t>> back = ReadNow(*store, 3, 100);
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(*back == c);
}

// The HDF5 file with checksums: a slot written twice back to back in one run of queued writes (its first
// write's last chunks may still be in flight when the second starts) holds the second write's bytes, and
// a slot written between holds its own.
TEST(SpillStore, RewriteOfASlotInFlightHoldsTheLastBytes) {
  ScratchDir dir;
  std::unique_ptr<SpillStore> store = OpenOrDie(Options(dir, /*checksum=*/true));
  ASSERT_NE(store, nullptr);
  const int64_t bytes = 9 * kMiB + 123;  // three chunks, the last partial
  const std::vector<uint8_t> first = Pattern(bytes, 1), other = Pattern(bytes, 2), second = Pattern(bytes, 3);
  std::vector<SpillStore::Ticket> tickets = {store->Write(6, other.data(), bytes), store->Write(5, first.data(), bytes),
                                             store->Write(5, second.data(), bytes)};
  for (SpillStore::Ticket t : tickets) ASSERT_TRUE(store->Wait(t).ok());
  Result<std::vector<uint8_t>> back = ReadNow(*store, 5, bytes);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(*back == second);
  back = ReadNow(*store, 6, bytes);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(*back == other);
}

TEST(SpillStore, TicketsAreWaitedForOnce) {
  std::unique_ptr<SpillStore> store = FaultyStore({});
  const std::vector<uint8_t> data = Pattern(10, 1);
  const SpillStore::Ticket t1 = store->Write(0, data.data(), 10);
  const SpillStore::Ticket t2 = store->Sync();
  EXPECT_GT(t2, t1);
  EXPECT_TRUE(store->Wait(t1).ok());
  EXPECT_EQ(store->Wait(t1).code(), Code::kInternal);
  EXPECT_EQ(store->Wait(t2 + 100).code(), Code::kInternal);
  EXPECT_TRUE(store->Wait(t2).ok());
}

TEST(SpillStore, DestructorFinishesQueuedWork) {
  auto shared = std::make_shared<GatedFile::Shared>();
  shared->Open();
  const std::vector<uint8_t> data = Pattern(1000, 1);
  {
    std::unique_ptr<SpillStore> store =
        SpillStore::WithFile(std::make_unique<GatedFile>(shared), SpillOptions{"mem", "job-w0", false, 0});
    for (int64_t slot = 0; slot < 20; ++slot) store->Write(slot, data.data(), 1000);
  }
  EXPECT_EQ(shared->writes_done.load(), 20);
}

// A real full disk: /dev/full fails every write with ENOSPC. HDF5 keeps the half-created file in its
// tables after that failure (and says so when the library shuts down), so the check runs in a child.
TEST(SpillStore, FullDiskThroughHdf5IsNoSpace) {
  if (!std::filesystem::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  ScratchDir dir;
  const std::string err_file = dir.File("stderr.txt"), message_file = dir.File("message.txt");
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const int err = ::open(err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(err, 2);
    Result<std::unique_ptr<SpillFile>> file = CreateHdf5SpillFile("/dev/full", /*checksum=*/false);
    Status st = file.status();
    if (file.ok()) {
      const std::vector<uint8_t> data = Pattern(8 * kMiB, 1);
      st = (*file)->Write(0, data.data(), 8 * kMiB);
      if (st.ok()) st = (*file)->Sync();
    }
    testing::WriteText(message_file, st.ToString());
    ::_exit(IsNoSpace(st) ? 0 : 1);
  }
  int wstatus = 0;
  ASSERT_EQ(::waitpid(child, &wstatus, 0), child);
  const std::string message = testing::ReadBytes(message_file);
  EXPECT_TRUE(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0) << "not a no-space error: " << message;
  EXPECT_THAT(message, HasSubstr("/dev/full"));
  EXPECT_EQ(testing::ReadBytes(err_file), "") << "HDF5 printed its error stack";
}

}  // namespace
}  // namespace tessel::storage
