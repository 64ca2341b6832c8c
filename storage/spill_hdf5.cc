// The HDF5 spill file (storage/spill_store.h CreateHdf5SpillFile).
//
// Layout: one 1-D uint8 dataset per slot, "/slots/<n>", chunked in chunks of up to 4 MiB on disk (with
// Fletcher32, 4 MiB - 4 bytes of data plus HDF5's 4-byte checksum, so a chunk still fills whole 4 KiB
// blocks), every chunk allocated when the slot is created (H5D_ALLOC_TIME_EARLY, no fill).
//
// Why the data bypasses H5Dwrite: HDF5 1.10 on Debian has no direct-I/O driver, and sec2's buffered
// writes followed by fsync reach about a fifth of the disk's O_DIRECT bandwidth on the machines we
// measured (bench/spill/README.md). So the chunks are allocated by HDF5 (aligned to 4 KiB through
// H5Pset_alignment) and written in place with pwrite on a second descriptor opened with O_DIRECT, at the
// addresses H5Dget_chunk_info reports; with a checksum, each chunk carries the Fletcher32 that HDF5's
// filter would have computed. HDF5 still owns every byte of metadata, and reads go through H5Dread, so a
// chunk written wrongly would fail every read test, and a corrupted one fails HDF5's own Fletcher32 check.
// Slots whose chunks are not whole aligned blocks (small slots) and filesystems that refuse O_DIRECT
// (tmpfs) take H5Dwrite or a buffered pwrite instead; Sync's fsync makes either durable.
//
// A slot rewritten with a different size is deleted and created again; HDF5's free-space manager reuses
// the freed chunks for later allocations while the file is open.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <future>
#include <map>
#include <memory>
#include <vector>

#include "core/file_descriptor.h"
#include "core/logging.h"
#include "storage/hdf5_util.h"
#include "storage/spill_store.h"

namespace tessel::storage {
namespace {

constexpr int64_t kBlock = 4096;                  // O_DIRECT alignment of offsets, lengths and buffers
constexpr int64_t kDiskChunk = int64_t{4} << 20;  // bytes of one chunk on disk
constexpr int64_t kChecksumBytes = 4;             // HDF5's Fletcher32 filter appends 4 bytes

int64_t RoundUp(int64_t n, int64_t to) { return (n + to - 1) / to * to; }

// HDF5's Fletcher32 (H5_checksum_fletcher32, H5checksum.c) over big-endian 16-bit words; the filter
// stores it little-endian after the chunk's data. HDF5 sums word by word with end-around-carry folding,
// a dependency chain that runs at well under the disk's speed. The same result in blocks: over k words,
// sum2 grows by k * sum1 + sum((k - i) * w_i) and sum1 by sum(w_i), which the compiler can vectorise.
// Folding keeps each sum congruent mod 65535 and never turns a non-zero sum into 0, so HDF5's 16-bit
// halves are 0 when every word is 0 and otherwise the residue in [1, 65535].
// Compiled for AVX-512, AVX2 and baseline x86-64, the loader picking the best (GCC function
// multiversioning): with 32-bit lane sums (blocks of 256 words keep them below 2^32) the block loop is
// vector multiplies and adds.
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"))) uint32_t Fletcher32(const uint8_t* data,
                                                                                                  size_t length) {
  constexpr uint64_t kMod = 65535;
  constexpr size_t kBlockWords = 256;  // (k - i) w < 2^24, and 256 of them stay below 2^32
  const size_t words = length / 2;
  uint64_t sum1 = 0, sum2 = 0, any = 0;
  for (size_t b = 0; b < words; b += kBlockWords) {
    const size_t k = std::min(kBlockWords, words - b);
    const uint8_t* p = data + 2 * b;
    uint32_t block = 0, weighted = 0;
    for (size_t i = 0; i < k; ++i) {
      const uint32_t w = (static_cast<uint32_t>(p[2 * i]) << 8) | p[2 * i + 1];
      block += w;
      weighted += static_cast<uint32_t>(k - i) * w;
    }
    sum2 = (sum2 + k * sum1 + weighted) % kMod;
    sum1 = (sum1 + block) % kMod;
    any |= block;
  }
  if (length % 2) {
    const uint64_t w = static_cast<uint64_t>(data[length - 1]) << 8;
    sum1 = (sum1 + w) % kMod;
    sum2 = (sum2 + sum1) % kMod;
    any |= w;
  }
  auto half = [&](uint64_t sum) -> uint32_t { return any == 0 ? 0 : sum == 0 ? 65535 : static_cast<uint32_t>(sum); };
  return (half(sum2) << 16) | half(sum1);
}

// Every description on this thread's HDF5 error stack, outermost first, joined with "; ".
std::string ErrorStackText() {
  std::string text;
  auto walk = [](unsigned, const H5E_error2_t* err, void* data) -> herr_t {
    auto* out = static_cast<std::string*>(data);
    if (err->desc != nullptr && err->desc[0] != '\0') *out += (out->empty() ? "" : "; ") + std::string(err->desc);
    return 0;
  };
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, walk, &text);
  return text;
}

// An HDF5 call failed: a full disk (sec2 reports "errno = 28" in its message, and errno may still say so)
// is the no-space error, anything else kStorage with HDF5's innermost message.
Status Hdf5Failure(const std::string& where, std::string_view what, int saved_errno) {
  const std::string stack = ErrorStackText();
  if (saved_errno == ENOSPC || stack.find("errno = 28,") != std::string::npos ||
      stack.find(std::strerror(ENOSPC)) != std::string::npos) {
    return NoSpaceError(StrCat(where, ": ", what), std::strerror(ENOSPC));
  }
  return h5::WriteError(where, what);
}

struct AlignedFree {
  void operator()(void* p) const { std::free(p); }
};

class Hdf5SpillFile final : public SpillFile {
 public:
  Hdf5SpillFile(std::string path, bool checksum) : path_(std::move(path)), checksum_(checksum) {}
  ~Hdf5SpillFile() override {
    h5::ScopedErrorSilencer silence;
    CollectAll();    // no write may outlive the buffers and the descriptor
    slots_.clear();  // datasets close before the group and the file
    slots_group_.Reset();
    file_.Reset();
  }

  Status Create() {
    h5::ScopedErrorSilencer silence;
    h5::PropList fapl(H5Pcreate(H5P_FILE_ACCESS));
    if (!fapl.valid() || H5Pset_fapl_sec2(fapl.get()) < 0 ||
        // The 1.10 format indexes a fixed-size chunked dataset with a fixed array: one lookup per chunk.
        H5Pset_libver_bounds(fapl.get(), H5F_LIBVER_V110, H5F_LIBVER_V110) < 0 ||
        // Every object of 4 KiB or more starts on a 4 KiB boundary, so chunks can be written with O_DIRECT.
        H5Pset_alignment(fapl.get(), kBlock, kBlock) < 0 ||
        // Metadata gathered in 1 MiB blocks away from the data, raw data never staged in a sieve buffer
        // larger than a chunk.
        H5Pset_meta_block_size(fapl.get(), 1 << 20) < 0 || H5Pset_sieve_buf_size(fapl.get(), kDiskChunk) < 0) {
      return h5::WriteError(path_, "cannot set up the file access properties");
    }
    file_ = h5::File(H5Fcreate(path_.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get()));
    if (!file_.valid()) return Hdf5Failure(path_, "cannot create the spill file", errno);
    slots_group_ = h5::Group(H5Gcreate2(file_.get(), "/slots", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    if (!slots_group_.valid()) return Hdf5Failure(path_, "cannot create /slots", errno);
    // A chunk is written whole or read whole: HDF5's chunk cache would only add a copy.
    dapl_ = h5::PropList(H5Pcreate(H5P_DATASET_ACCESS));
    if (!dapl_.valid() || H5Pset_chunk_cache(dapl_.get(), 0, 0, 1.0) < 0) {
      return h5::WriteError(path_, "cannot set up the dataset access properties");
    }
    int fd = ::open(path_.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_DIRECT);
    direct_ = fd >= 0;
    if (fd < 0 && errno == EINVAL) fd = ::open(path_.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);  // tmpfs: no O_DIRECT
    if (fd < 0) return StorageError(StrCat(path_, ": cannot open for writing: ", std::strerror(errno)));
    data_fd_.Reset(fd);
    void* bounce = nullptr;
    if (posix_memalign(&bounce, kBlock, static_cast<size_t>(kDiskChunk)) != 0) {
      return StorageError(StrCat(path_, ": out of memory for a ", kDiskChunk, "-byte I/O buffer"));
    }
    bounce_.reset(static_cast<uint8_t*>(bounce));
    if (posix_memalign(&bounce, kBlock, static_cast<size_t>(kDiskChunk)) != 0) {
      return StorageError(StrCat(path_, ": out of memory for a ", kDiskChunk, "-byte I/O buffer"));
    }
    bounce2_.reset(static_cast<uint8_t*>(bounce));
    return Status::Ok();
  }

  Status Write(int64_t slot, const void* data, int64_t bytes) override {
    h5::ScopedErrorSilencer silence;
    const std::string where = Where(slot);
    if (bytes < 0 || (bytes > 0 && data == nullptr))
      return InternalError(StrCat(where, ": bad write of ", bytes, " bytes"));
    // A slot's chunks are rewritten in place: its earlier writes must be on the disk first.
    for (InFlightChunk& c : in_flight_) {
      if (c.slot == slot) Collect(c);
    }
    auto it = slots_.find(slot);
    if (it != slots_.end() && it->second.bytes != bytes) {
      // A different size: drop the dataset (its chunks go back to the free-space manager).
      const bool had_dataset = it->second.dataset.valid();
      slots_.erase(it);
      if (had_dataset && H5Ldelete(file_.get(), DatasetName(slot).c_str(), H5P_DEFAULT) < 0) {
        return Hdf5Failure(where, "cannot delete the slot to resize it", errno);
      }
      it = slots_.end();
    }
    if (it == slots_.end()) {
      TESSEL_ASSIGN_OR_RETURN(Slot created, CreateSlot(slot, bytes));
      it = slots_.emplace(slot, std::move(created)).first;
    }
    Slot& s = it->second;
    if (bytes == 0) return Status::Ok();
    if (s.chunk_addresses.empty()) {
      if (H5Dwrite(s.dataset.get(), H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0) {
        return Hdf5Failure(where, "cannot write data", errno);
      }
      return Status::Ok();
    }
    return WriteChunks(s, static_cast<const uint8_t*>(data), where);
  }

  Status Read(int64_t slot, void* data, int64_t bytes) override {
    h5::ScopedErrorSilencer silence;
    const std::string where = Where(slot);
    auto it = slots_.find(slot);
    if (it == slots_.end()) return InternalError(StrCat(where, ": read of a slot never written"));
    if (it->second.bytes != bytes) {
      return InternalError(StrCat(where, ": read of ", bytes, " bytes, but the slot holds ", it->second.bytes));
    }
    if (bytes == 0) return Status::Ok();
    CollectAll();  // the reads below use the bounce buffers, and may read a slot still being written
    // Without a checksum, the chunks come straight back from the disk into an aligned buffer (O_DIRECT,
    // no copy and no page cache), the way they were written.
    if (!checksum_ && direct_ && !it->second.chunk_addresses.empty() &&
        reinterpret_cast<uintptr_t>(data) % kBlock == 0) {
      return ReadChunks(it->second, static_cast<uint8_t*>(data), where);
    }
    // With a checksum, whole chunks come back with O_DIRECT too and are verified here, the next chunk
    // being read while this one is checked (H5Dread's filter checks word by word, at a fraction of the
    // disk's speed).
    if (checksum_ && direct_ && !it->second.chunk_addresses.empty()) {
      return ReadVerifiedChunks(it->second, static_cast<uint8_t*>(data), where);
    }
    if (H5Dread(it->second.dataset.get(), H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0) {
      const int saved_errno = errno;
      const std::string stack = ErrorStackText();
      if (stack.find("Fletcher32") != std::string::npos || stack.find("checksum") != std::string::npos) {
        return StorageError(StrCat(where, ": checksum mismatch (Fletcher32): the data on disk is corrupt"));
      }
      return Hdf5Failure(where, "cannot read data", saved_errno);
    }
    return Status::Ok();
  }

  Status Sync() override {
    h5::ScopedErrorSilencer silence;
    CollectAll();
    if (!failed_.empty()) {
      // A write that failed in the background and was never settled: the file does not hold it.
      Status first = std::move(failed_.begin()->second);
      failed_.clear();
      return first;
    }
    if (H5Fflush(file_.get(), H5F_SCOPE_LOCAL) < 0) return Hdf5Failure(path_, "cannot flush", errno);
    void* handle = nullptr;
    if (H5Fget_vfd_handle(file_.get(), H5P_DEFAULT, &handle) < 0 || handle == nullptr) {
      return h5::WriteError(path_, "cannot get the file descriptor");
    }
    // One inode: this fsync also covers what was written through data_fd_.
    if (::fsync(*static_cast<int*>(handle)) != 0) {
      const int e = errno;
      if (e == ENOSPC) return NoSpaceError(StrCat(path_, ": fsync"), std::strerror(e));
      return StorageError(StrCat(path_, ": fsync: ", std::strerror(e)));
    }
    return Status::Ok();
  }

  bool InFlight(int64_t slot) const override {
    for (const InFlightChunk& c : in_flight_) {
      if (c.done.valid() && c.slot == slot && c.done.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
        return true;
      }
    }
    return false;
  }

  Status Settle(int64_t slot) override {
    for (InFlightChunk& c : in_flight_) {
      if (c.slot == slot) Collect(c);
    }
    auto it = failed_.find(slot);
    if (it == failed_.end()) return Status::Ok();
    Status status = std::move(it->second);
    failed_.erase(it);
    return status;
  }

  int64_t size_bytes() const override {
    h5::ScopedErrorSilencer silence;
    hsize_t size = 0;
    if (H5Fget_filesize(file_.get(), &size) < 0) return 0;
    return static_cast<int64_t>(size);
  }

 private:
  struct Slot {
    h5::Dataset dataset;
    int64_t slot = 0;
    int64_t bytes = 0;
    int64_t chunk_data = 0;                // data bytes per chunk
    std::vector<int64_t> chunk_addresses;  // empty: written through H5Dwrite
  };

  static std::string DatasetName(int64_t slot) { return StrCat("/slots/", slot); }
  std::string Where(int64_t slot) const { return StrCat(path_, ": slot ", slot); }

  Result<Slot> CreateSlot(int64_t slot, int64_t bytes) {
    const std::string where = Where(slot);
    Slot s;
    s.slot = slot;
    s.bytes = bytes;
    if (bytes == 0) return s;  // no dataset: HDF5 chunks need a non-empty extent
    const int64_t overhead = checksum_ ? kChecksumBytes : 0;
    // As few chunks as fit, of equal size rounded up to whole blocks on disk, so that a slot just over a
    // multiple of the chunk does not leave a nearly empty chunk. A fixed-size dimension may not be
    // smaller than its chunk, so a slot that fits one chunk has one chunk of its own size.
    const int64_t chunks = (bytes + kDiskChunk - overhead - 1) / (kDiskChunk - overhead);
    s.chunk_data = chunks == 1 ? bytes : RoundUp((bytes + chunks - 1) / chunks + overhead, kBlock) - overhead;
    const hsize_t dims = static_cast<hsize_t>(bytes), chunk = static_cast<hsize_t>(s.chunk_data);
    h5::Dataspace space(H5Screate_simple(1, &dims, nullptr));
    h5::PropList dcpl(H5Pcreate(H5P_DATASET_CREATE));
    if (!space.valid() || !dcpl.valid() || H5Pset_chunk(dcpl.get(), 1, &chunk) < 0 ||
        (checksum_ && H5Pset_fletcher32(dcpl.get()) < 0) || H5Pset_alloc_time(dcpl.get(), H5D_ALLOC_TIME_EARLY) < 0 ||
        H5Pset_fill_time(dcpl.get(), H5D_FILL_TIME_NEVER) < 0) {
      return h5::WriteError(where, "cannot set up the dataset properties");
    }
    s.dataset = h5::Dataset(H5Dcreate2(file_.get(), DatasetName(slot).c_str(), H5T_NATIVE_UINT8, space.get(),
                                       H5P_DEFAULT, dcpl.get(), dapl_.get()));
    if (!s.dataset.valid()) return Hdf5Failure(where, "cannot create the slot's dataset", errno);
    TESSEL_ASSIGN_OR_RETURN(s.chunk_addresses, ChunkAddresses(s, space.get(), where));
    return s;
  }

  // The chunks' file addresses in order, when every chunk is a whole number of aligned blocks of the
  // expected size; otherwise empty (the slot is then written through H5Dwrite).
  Result<std::vector<int64_t>> ChunkAddresses(const Slot& s, hid_t space, const std::string& where) {
    const int64_t disk_chunk = s.chunk_data + (checksum_ ? kChecksumBytes : 0);
    std::vector<int64_t> addresses;
    if (disk_chunk % kBlock != 0) return addresses;
    hsize_t n = 0;
    if (H5Dget_num_chunks(s.dataset.get(), space, &n) < 0) return h5::WriteError(where, "cannot count the chunks");
    const hsize_t expected = static_cast<hsize_t>((s.bytes + s.chunk_data - 1) / s.chunk_data);
    if (n != expected) return addresses;
    addresses.resize(n);
    for (hsize_t i = 0; i < n; ++i) {
      hsize_t offset = 0, size = 0;
      unsigned filter_mask = 0;
      haddr_t address = HADDR_UNDEF;
      if (H5Dget_chunk_info(s.dataset.get(), space, i, &offset, &filter_mask, &address, &size) < 0) {
        return h5::WriteError(where, "cannot read the chunk index");
      }
      const int64_t index = static_cast<int64_t>(offset) / s.chunk_data;
      if (address == HADDR_UNDEF || address % kBlock != 0 || static_cast<int64_t>(size) != disk_chunk ||
          filter_mask != 0 || static_cast<int64_t>(offset) % s.chunk_data != 0 || index >= static_cast<int64_t>(n)) {
        return std::vector<int64_t>{};
      }
      addresses[static_cast<size_t>(index)] = static_cast<int64_t>(address);
    }
    return addresses;
  }

  Status PWrite(const uint8_t* buffer, int64_t length, int64_t offset, const std::string& where) {
    int64_t done = 0;
    while (done < length) {
      const ssize_t n = ::pwrite(data_fd_.get(), buffer + done, static_cast<size_t>(length - done), offset + done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        const int e = errno;
        if (e == ENOSPC || e == EDQUOT) return NoSpaceError(StrCat(where, ": write"), std::strerror(e));
        return StorageError(StrCat(where, ": write of ", length, " bytes at offset ", offset, ": ", std::strerror(e)));
      }
      if (n == 0) return StorageError(StrCat(where, ": short write: ", done, " of ", length, " bytes"));
      done += n;
    }
    return Status::Ok();
  }

  Status PRead(uint8_t* buffer, int64_t length, int64_t offset, const std::string& where) {
    int64_t done = 0;
    while (done < length) {
      const ssize_t n = ::pread(data_fd_.get(), buffer + done, static_cast<size_t>(length - done), offset + done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        return StorageError(
            StrCat(where, ": read of ", length, " bytes at offset ", offset, ": ", std::strerror(errno)));
      }
      if (n == 0)
        return StorageError(StrCat(where, ": short read: ", done, " of ", length, " bytes (truncated file?)"));
      done += n;
    }
    return Status::Ok();
  }

  // The reverse of WriteChunks without a checksum: runs of whole chunks that lie back to back on disk in one
  // read each, a last partial chunk through the bounce buffer.
  Status ReadChunks(const Slot& s, uint8_t* data, const std::string& where) {
    const int64_t n = static_cast<int64_t>(s.chunk_addresses.size());
    int64_t i = 0;
    while (i < n) {
      const int64_t begin = i * s.chunk_data;
      const int64_t length = std::min(s.chunk_data, s.bytes - begin);
      if (length == s.chunk_data) {
        int64_t j = i + 1;
        while (j < n && (j + 1) * s.chunk_data <= s.bytes &&
               s.chunk_addresses[j] == s.chunk_addresses[j - 1] + s.chunk_data) {
          ++j;
        }
        TESSEL_RETURN_IF_ERROR(PRead(data + begin, (j - i) * s.chunk_data, s.chunk_addresses[i], where));
        i = j;
        continue;
      }
      TESSEL_RETURN_IF_ERROR(PRead(bounce_.get(), RoundUp(length, kBlock), s.chunk_addresses[i], where));
      std::memcpy(data + begin, bounce_.get(), static_cast<size_t>(length));
      ++i;
    }
    return Status::Ok();
  }

  Status ReadVerifiedChunks(const Slot& s, uint8_t* data, const std::string& where) {
    const int64_t disk_chunk = s.chunk_data + kChecksumBytes;
    const int64_t n = static_cast<int64_t>(s.chunk_addresses.size());
    uint8_t* buffers[2] = {bounce_.get(), bounce2_.get()};
    const auto read = [&](int64_t i) {
      return std::async(std::launch::async, [this, &s, &where, i, disk_chunk, buffer = buffers[i % 2]] {
        return PRead(buffer, disk_chunk, s.chunk_addresses[static_cast<size_t>(i)], where);
      });
    };
    std::future<Status> next = read(0);
    Status first;
    for (int64_t i = 0; i < n; ++i) {
      const Status got = next.get();
      if (i + 1 < n) next = read(i + 1);
      if (!first.ok()) continue;
      if (!got.ok()) {
        first = got;
        continue;
      }
      const uint8_t* chunk = buffers[i % 2];
      uint32_t stored = 0;
      for (int b = 0; b < 4; ++b) stored |= static_cast<uint32_t>(chunk[s.chunk_data + b]) << (8 * b);
      if (Fletcher32(chunk, static_cast<size_t>(s.chunk_data)) != stored) {
        first = StorageError(
            StrCat(where, ": checksum mismatch (Fletcher32) in chunk ", i, ": the data on disk is corrupt"));
        continue;
      }
      const int64_t begin = i * s.chunk_data;
      std::memcpy(data + begin, chunk, static_cast<size_t>(std::min(s.chunk_data, s.bytes - begin)));
    }
    return first;
  }

  // A write in flight: one chunk from a bounce buffer, written in the background.
  struct InFlightChunk {
    int64_t slot = -1;
    std::future<Status> done;
  };

  // Waits for the chunk's write; a failure is kept for Settle of its slot (the first one of the slot).
  void Collect(InFlightChunk& c) {
    if (!c.done.valid()) return;
    Status status = c.done.get();
    if (!status.ok()) failed_.emplace(c.slot, std::move(status));
    c.slot = -1;
  }
  void CollectAll() {
    for (InFlightChunk& c : in_flight_) Collect(c);
  }

  // Each chunk in place: runs of whole chunks straight from an aligned caller buffer (no checksum), the
  // others through the aligned bounce buffer (last partial chunk, checksum, unaligned source).
  // Chunks that go through a bounce buffer are double-buffered: chunk i is written in the background
  // while chunk i + 1 is copied and summed, across slots too: the last two chunks may still be on their
  // way when this returns (InFlight, Settle), so a run of writes keeps the disk busy.
  Status WriteChunks(const Slot& s, const uint8_t* data, const std::string& where) {
    const int64_t overhead = checksum_ ? kChecksumBytes : 0;
    const int64_t disk_chunk = s.chunk_data + overhead;
    const int64_t n = static_cast<int64_t>(s.chunk_addresses.size());
    const bool aligned_source = reinterpret_cast<uintptr_t>(data) % kBlock == 0 || !direct_;
    uint8_t* buffers[2] = {bounce_.get(), bounce2_.get()};
    Status first;
    int64_t i = 0;
    while (i < n && first.ok()) {
      const int64_t begin = i * s.chunk_data;
      const int64_t length = std::min(s.chunk_data, s.bytes - begin);
      if (!checksum_ && aligned_source && length == s.chunk_data) {
        // The longest run of whole chunks that lie back to back on disk: one large write.
        int64_t j = i + 1;
        while (j < n && (j + 1) * s.chunk_data <= s.bytes &&
               s.chunk_addresses[j] == s.chunk_addresses[j - 1] + disk_chunk) {
          ++j;
        }
        const Status st = PWrite(data + begin, (j - i) * disk_chunk, s.chunk_addresses[i], where);
        if (!st.ok()) first = st;
        i = j;
        continue;
      }
      InFlightChunk& buffer_write = in_flight_[turn_];
      Collect(buffer_write);  // this buffer's previous write must be done before it is refilled
      uint8_t* chunk = buffers[turn_];
      std::memcpy(chunk, data + begin, static_cast<size_t>(length));
      // The tail of a partial chunk is never read, but HDF5 checksums the whole chunk.
      std::memset(chunk + length, 0, static_cast<size_t>(s.chunk_data - length));
      int64_t write_length = disk_chunk;
      if (checksum_) {
        const uint32_t sum = Fletcher32(chunk, static_cast<size_t>(s.chunk_data));
        for (int b = 0; b < 4; ++b) chunk[s.chunk_data + b] = static_cast<uint8_t>(sum >> (8 * b));
      } else {
        write_length = std::min(disk_chunk, RoundUp(length, kBlock));
      }
      const int64_t address = s.chunk_addresses[i];
      buffer_write.slot = s.slot;
      buffer_write.done = std::async(std::launch::async, [this, chunk, write_length, address, where] {
        return PWrite(chunk, write_length, address, where);
      });
      turn_ ^= 1;
      ++i;
    }
    return first;
  }

  const std::string path_;
  const bool checksum_;
  h5::File file_;
  h5::Group slots_group_;
  h5::PropList dapl_;
  FileDescriptor data_fd_;  // the data path, O_DIRECT where the filesystem allows it
  bool direct_ = false;     // data_fd_ has O_DIRECT
  std::unique_ptr<uint8_t, AlignedFree> bounce_;
  std::unique_ptr<uint8_t, AlignedFree> bounce2_;  // the other half of the write path's double buffer
  std::map<int64_t, Slot> slots_;
  InFlightChunk in_flight_[2];        // the writes from bounce_ and bounce2_
  int turn_ = 0;                      // the buffer the next bounced chunk goes to
  std::map<int64_t, Status> failed_;  // slots whose writes failed, until their Settle
};

}  // namespace

Result<std::unique_ptr<SpillFile>> CreateHdf5SpillFile(const std::string& path, bool checksum) {
  auto file = std::make_unique<Hdf5SpillFile>(path, checksum);
  TESSEL_RETURN_IF_ERROR(file->Create());
  return std::unique_ptr<SpillFile>(std::move(file));
}

}  // namespace tessel::storage
