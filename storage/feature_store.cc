#include "storage/feature_store.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <utility>

#include "core/cuda_device.h"
#include "core/file_descriptor.h"
#include "core/logging.h"
#include "storage/feature_check.h"
#include "storage/graph.h"
#include "storage/hdf5_util.h"

namespace tessel::storage {
namespace {

// Both modes serve the file's bytes as floats without conversion.
static_assert(std::endian::native == std::endian::little, "the feature store serves little-endian floats as stored");

constexpr int64_t kFloatBytes = sizeof(float);

// One node type as the file describes it.
struct TypeInfo {
  std::string name;
  std::string dataset;  // "/nodes/<name>/features"
  int64_t count = 0;
  int64_t first_id = 0;  // its first global id
  bool has_features = false;
  int64_t dim = 0;
  uint64_t offset = 0;  // absolute file offset of the data (valid when count * dim > 0)
  // The owned ids of this type: owned_ids[owned_begin, owned_end).
  size_t owned_begin = 0;
  size_t owned_end = 0;
  size_t num_owned() const { return owned_end - owned_begin; }
};

const char* LayoutName(H5D_layout_t layout) {
  switch (layout) {
    case H5D_COMPACT:
      return "compact";
    case H5D_CONTIGUOUS:
      return "contiguous";
    case H5D_CHUNKED:
      return "chunked";
    case H5D_VIRTUAL:
      return "virtual";
    default:
      return "unknown";
  }
}

// Reads the dataset's metadata into `t` and checks everything but the values (see the header).
Status InspectFeatures(hid_t file, const std::string& fname, uint64_t file_size, TypeInfo* t) {
  const std::string where = StrCat(fname, ": ", t->dataset);
  TESSEL_ASSIGN_OR_RETURN(h5::Dataset d, h5::OpenDataset(file, t->dataset, fname));
  h5::Datatype type(H5Dget_type(d.get()));
  if (!type.valid()) return h5::ReadError(where, "cannot read the datatype");
  if (H5Tequal(type.get(), H5T_IEEE_F32LE) <= 0) {
    const bool big_endian = H5Tget_class(type.get()) == H5T_FLOAT && H5Tget_order(type.get()) == H5T_ORDER_BE;
    return BadDataError(StrCat(where, ": element type is ", h5::DescribeType(type.get()),
                               big_endian ? " (big-endian)" : "", "; features must be float32 (little-endian IEEE)"));
  }
  TESSEL_ASSIGN_OR_RETURN(std::vector<hsize_t> dims, h5::Shape(d.get(), where));
  if (dims.size() != 2)
    return BadDataError(StrCat(where, ": expected rank 2 [count, width], found rank ", dims.size()));
  if (dims[0] != static_cast<hsize_t>(t->count)) {
    return BadDataError(
        StrCat(where, ": shape [", dims[0], ", ", dims[1], "] does not match /nodes/", t->name, "/count ", t->count));
  }
  if (dims[1] == 0) return BadDataError(StrCat(where, ": shape [", dims[0], ", 0] has no columns"));
  if (dims[1] > (uint64_t{1} << 40) || (dims[0] > 0 && dims[1] > (uint64_t{1} << 60) / kFloatBytes / dims[0])) {
    return BadDataError(StrCat(where, ": absurd shape [", dims[0], ", ", dims[1], "]"));
  }
  t->has_features = true;
  t->dim = static_cast<int64_t>(dims[1]);

  h5::PropList dcpl(H5Dget_create_plist(d.get()));
  if (!dcpl.valid()) return h5::ReadError(where, "cannot read the creation properties");
  const H5D_layout_t layout = H5Pget_layout(dcpl.get());
  if (layout != H5D_CONTIGUOUS) {
    return BadDataError(StrCat(where, ": layout is ", LayoutName(layout),
                               "; the feature store serves rows in place and needs a contiguous dataset "
                               "(Tessel writes one; or rewrite the file with h5repack -l ",
                               t->dataset, ":CONTI)"));
  }
  if (H5Pget_external_count(dcpl.get()) > 0) {
    return BadDataError(StrCat(where, ": stored in an external file; the feature store needs the data inside ", fname));
  }
  const uint64_t bytes = static_cast<uint64_t>(t->count) * static_cast<uint64_t>(t->dim) * kFloatBytes;
  if (bytes == 0) return Status::Ok();
  H5D_space_status_t status = H5D_SPACE_STATUS_ERROR;
  if (H5Dget_space_status(d.get(), &status) < 0) return h5::ReadError(where, "cannot read the storage status");
  // Checked first: HDF5 1.10 reports an unallocated dataset's offset as HADDR_UNDEF plus the user block size.
  const haddr_t offset = H5Dget_offset(d.get());
  if (status == H5D_SPACE_STATUS_NOT_ALLOCATED || offset == HADDR_UNDEF) {
    return BadDataError(StrCat(where, ": no storage is allocated (the dataset was created but never written)"));
  }
  if (offset > file_size || bytes > file_size - offset) {
    return BadDataError(StrCat(where, ": data at bytes [", offset, ", ", offset + bytes,
                               ") runs past the end of the file (", file_size, " bytes; truncated?)"));
  }
  t->offset = offset;
  return Status::Ok();
}

Result<std::vector<TypeInfo>> ReadTypes(hid_t file, const std::string& fname, uint64_t file_size) {
  const std::string meta_where = StrCat(fname, ": /meta");
  std::vector<std::string> names;
  {
    TESSEL_ASSIGN_OR_RETURN(h5::Group meta, h5::OpenGroup(file, "/meta", fname));
    TESSEL_ASSIGN_OR_RETURN(int64_t version, h5::ReadInt64Attribute(meta.get(), "format_version", meta_where));
    if (version != kGraphFormatVersion) {
      return BadDataError(
          StrCat(meta_where, ": format_version ", version, " is not supported (expected ", kGraphFormatVersion, ")"));
    }
    TESSEL_ASSIGN_OR_RETURN(names, h5::ReadStringArrayAttribute(meta.get(), "node_types", meta_where));
  }
  std::vector<TypeInfo> types(names.size());
  int64_t first_id = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    TypeInfo& t = types[i];
    t.name = names[i];
    if (t.name.empty() || t.name == "." || t.name.find('/') != std::string::npos) {
      return BadDataError(StrCat(meta_where, ": node type name '", t.name, "' is empty or contains '/'"));
    }
    t.dataset = StrCat("/nodes/", t.name, "/features");
    TESSEL_ASSIGN_OR_RETURN(t.count, h5::ReadScalar<int64_t>(file, StrCat("/nodes/", t.name, "/count"), fname));
    if (t.count < 0 || t.count > (int64_t{1} << 48)) {
      return BadDataError(StrCat(fname, ": /nodes/", t.name, "/count: count ", t.count, " out of range"));
    }
    t.first_id = first_id;
    first_id += t.count;
    if (h5::Exists(file, t.dataset)) TESSEL_RETURN_IF_ERROR(InspectFeatures(file, fname, file_size, &t));
  }
  const TypeInfo* first = nullptr;
  for (const TypeInfo& t : types) {
    if (!t.has_features) continue;
    if (first == nullptr) {
      first = &t;
    } else if (t.dim != first->dim) {
      return BadDataError(StrCat(fname, ": ", t.dataset, ": width ", t.dim, " differs from ", first->dataset, " width ",
                                 first->dim, "; every node type's features must have one width"));
    }
  }
  return types;
}

// Assigns each type its slice of the owned ids and checks that each owned id is in range and in a type
// with features.
Status SliceOwnedIds(const std::string& fname, const std::vector<int64_t>& owned, std::vector<TypeInfo>* types) {
  const int64_t total = types->empty() ? 0 : types->back().first_id + types->back().count;
  if (!owned.empty() && owned.back() >= total) {
    return BadDataError(StrCat(fname, ": node id ", owned.back(), " is beyond the file's ", total,
                               " nodes (a partition of another graph?)"));
  }
  for (TypeInfo& t : *types) {
    t.owned_begin = static_cast<size_t>(std::lower_bound(owned.begin(), owned.end(), t.first_id) - owned.begin());
    t.owned_end =
        static_cast<size_t>(std::lower_bound(owned.begin(), owned.end(), t.first_id + t.count) - owned.begin());
    if (t.num_owned() > 0 && !t.has_features) {
      const int64_t id = owned[t.owned_begin];
      return BadDataError(StrCat(fname, ": ", t.dataset, ": missing, but this worker serves node ", t.name, ":",
                                 id - t.first_id, " (global id ", id,
                                 "); every node type a worker serves needs features"));
    }
  }
  return Status::Ok();
}

// Calls fn(first_index, length) for each run of consecutive ids in owned[begin, end).
template <typename Fn>
Status ForEachRun(const std::vector<int64_t>& owned, size_t begin, size_t end, Fn&& fn) {
  size_t i = begin;
  while (i < end) {
    size_t j = i + 1;
    while (j < end && owned[j] == owned[j - 1] + 1) ++j;
    TESSEL_RETURN_IF_ERROR(fn(i, j - i));
    i = j;
  }
  return Status::Ok();
}

Status ReadFully(int fd, void* dst, uint64_t bytes, uint64_t offset, std::string_view where) {
  auto* p = static_cast<char*>(dst);
  while (bytes > 0) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(bytes, uint64_t{1} << 30));
    const ssize_t got = ::pread(fd, p, want, static_cast<off_t>(offset));
    if (got < 0) {
      if (errno == EINTR) continue;
      return StorageError(StrCat(where, ": read failed at byte ", offset, ": ", std::strerror(errno)));
    }
    if (got == 0) return BadDataError(StrCat(where, ": unexpected end of file at byte ", offset, " (truncated?)"));
    p += got;
    bytes -= static_cast<uint64_t>(got);
    offset += static_cast<uint64_t>(got);
  }
  return Status::Ok();
}

}  // namespace

Result<FeatureStore> FeatureStore::Open(const std::string& graph_path, std::vector<int64_t> owned_ids,
                                        const Options& options) {
  if (options.mode != Mode::kMapped && options.mode != Mode::kPinned) {
    return InternalError(StrCat("feature store over ", graph_path, ": mode \"", NameOf(options.mode),
                                "\" is not one it serves (mapped, pinned)"));
  }
  for (size_t i = 1; i < owned_ids.size(); ++i) {
    if (owned_ids[i] <= owned_ids[i - 1]) {
      return InternalError(StrCat("feature store over ", graph_path,
                                  ": owned ids must be sorted ascending without repeats, but index ", i, " holds ",
                                  owned_ids[i], " after ", owned_ids[i - 1]));
    }
  }
  if (!owned_ids.empty() && owned_ids.front() < 0) {
    return InternalError(StrCat("feature store over ", graph_path, ": negative owned id ", owned_ids.front()));
  }

  // HDF5 describes the datasets; the rows themselves are mapped or read through a plain descriptor.
  FileDescriptor fd;
  std::vector<TypeInfo> types;
  {
    h5::ScopedErrorSilencer silence;
    TESSEL_ASSIGN_OR_RETURN(h5::File file, h5::OpenFileReadOnly(graph_path));
    fd.Reset(::open(graph_path.c_str(), O_RDONLY | O_CLOEXEC));
    struct stat st;
    if (fd.get() < 0 || ::fstat(fd.get(), &st) != 0) {
      return BadDataError(StrCat(graph_path, ": cannot open: ", std::strerror(errno)));
    }
    TESSEL_ASSIGN_OR_RETURN(types, ReadTypes(file.get(), graph_path, static_cast<uint64_t>(st.st_size)));
  }
  TESSEL_RETURN_IF_ERROR(SliceOwnedIds(graph_path, owned_ids, &types));

  FeatureStore store;
  store.mode_ = options.mode;
  for (const TypeInfo& t : types) {
    if (t.has_features) {
      store.feature_dim_ = t.dim;
      break;
    }
  }
  store.type_offsets_.reserve(types.size() + 1);
  for (const TypeInfo& t : types) store.type_offsets_.push_back(t.first_id);
  store.type_offsets_.push_back(types.empty() ? 0 : types.back().first_id + types.back().count);
  store.type_table_.assign(types.size(), -1);
  store.owned_ids_ = std::move(owned_ids);
  const std::vector<int64_t>& owned = store.owned_ids_;
  // Locate() is on every gathered row's path: a dense slot per node (4 bytes a node) rather than a
  // binary search of the owned ids (a chain of cache misses per row).
  store.slot_of_.assign(static_cast<size_t>(std::max<int64_t>(store.type_offsets_.back(), 0)), -1);
  for (size_t i = 0; i < owned.size(); ++i) {
    if (owned[i] >= 0 && owned[i] < static_cast<int64_t>(store.slot_of_.size())) {
      store.slot_of_[static_cast<size_t>(owned[i])] = static_cast<int32_t>(i);
    }
  }
  const int64_t dim = store.feature_dim_;
  const uint64_t row_bytes = static_cast<uint64_t>(dim) * kFloatBytes;

  if (options.mode == Mode::kMapped) {
    const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
    for (size_t ti = 0; ti < types.size(); ++ti) {
      const TypeInfo& t = types[ti];
      if (t.num_owned() == 0) continue;
      const std::string where = StrCat(graph_path, ": ", t.dataset);
      if (t.offset % alignof(float) != 0) {
        return BadDataError(StrCat(where, ": data starts at byte ", t.offset,
                                   ", not a multiple of 4, so its rows cannot be served in place as floats (use the "
                                   "pinned store, or rewrite the file aligned: h5repack -t 1 -a 64)"));
      }
      const uint64_t aligned = t.offset / page * page;
      const uint64_t length = t.offset - aligned + static_cast<uint64_t>(t.count) * row_bytes;
      void* addr = ::mmap(nullptr, length, PROT_READ, MAP_SHARED, fd.get(), static_cast<off_t>(aligned));
      if (addr == MAP_FAILED) {
        return StorageError(StrCat(where, ": cannot map ", length, " bytes: ", std::strerror(errno)));
      }
      store.mappings_.push_back(Mapping{addr, length, false});  // from here the store unmaps it
      // Gathers jump between rows: read-ahead would only pull in rows of other workers.
      ::madvise(addr, length, MADV_RANDOM);
      const auto* data = reinterpret_cast<const float*>(static_cast<const char*>(addr) + (t.offset - aligned));
      store.type_table_[ti] = static_cast<int32_t>(store.tables_.size());
      store.tables_.push_back(Table{data, t.count});
      store.bytes_ += static_cast<int64_t>(length);
      TESSEL_RETURN_IF_ERROR(ForEachRun(owned, t.owned_begin, t.owned_end, [&](size_t first, size_t n) -> Status {
        const int64_t local = owned[first] - t.first_id;
        const int64_t bad = FirstNonFinite(data + local * dim, static_cast<int64_t>(n) * dim);
        if (bad < 0) return Status::Ok();
        const int64_t row = local + bad / dim;
        return NonFiniteFeatureError(where, t.name, row, t.first_id + row, bad % dim, data[local * dim + bad]);
      }));
    }
    if (options.cuda_access == CudaAccess::kRegisterMappedTables) {
      for (Mapping& m : store.mappings_) {
        TESSEL_RETURN_IF_ERROR(RegisterHostMemory(m.addr, m.length).WithContext(graph_path));
        m.registered = true;
      }
    }
    return store;
  }

  // kPinned: the owned rows, packed, in one buffer.
  const uint64_t total_bytes = owned.size() * row_bytes;
  if (total_bytes == 0) return store;
  Allocator* allocator = options.allocator != nullptr ? options.allocator : &HostAllocator();
  Result<void*> buffer = allocator->Allocate(total_bytes);
  if (!buffer.ok()) {
    return buffer.status().WithContext(StrCat(graph_path, ": feature store of ", owned.size(), " rows"));
  }
  store.allocator_ = allocator;
  store.buffer_ = *buffer;
  store.bytes_ = static_cast<int64_t>(total_bytes);
  auto* rows = static_cast<float*>(store.buffer_);
  store.tables_.push_back(Table{rows, static_cast<int64_t>(owned.size())});
  for (const TypeInfo& t : types) {
    const std::string where = StrCat(graph_path, ": ", t.dataset);
    TESSEL_RETURN_IF_ERROR(ForEachRun(owned, t.owned_begin, t.owned_end, [&](size_t first, size_t n) {
      const uint64_t local = static_cast<uint64_t>(owned[first] - t.first_id);
      return ReadFully(fd.get(), rows + first * static_cast<size_t>(dim), n * row_bytes, t.offset + local * row_bytes,
                       where);
    }));
  }
  const int64_t bad = FirstNonFinite(rows, static_cast<int64_t>(owned.size()) * dim);
  if (bad >= 0) {
    const int64_t id = owned[static_cast<size_t>(bad / dim)];
    const auto ti = static_cast<size_t>(std::upper_bound(store.type_offsets_.begin(), store.type_offsets_.end(), id) -
                                        store.type_offsets_.begin() - 1);
    return NonFiniteFeatureError(StrCat(graph_path, ": ", types[ti].dataset), types[ti].name, id - types[ti].first_id,
                                 id, bad % dim, rows[bad]);
  }
  return store;
}

FeatureStore::FeatureStore(FeatureStore&& other) noexcept { *this = std::move(other); }

FeatureStore& FeatureStore::operator=(FeatureStore&& other) noexcept {
  if (this != &other) {
    Release();
    mode_ = other.mode_;
    feature_dim_ = std::exchange(other.feature_dim_, 0);
    bytes_ = std::exchange(other.bytes_, 0);
    owned_ids_ = std::exchange(other.owned_ids_, {});
    slot_of_ = std::exchange(other.slot_of_, {});
    type_offsets_ = std::exchange(other.type_offsets_, {});
    type_table_ = std::exchange(other.type_table_, {});
    tables_ = std::exchange(other.tables_, {});
    mappings_ = std::exchange(other.mappings_, {});
    allocator_ = std::exchange(other.allocator_, nullptr);
    buffer_ = std::exchange(other.buffer_, nullptr);
  }
  return *this;
}

FeatureStore::~FeatureStore() { Release(); }

void FeatureStore::Release() {
  tables_.clear();
  for (const Mapping& m : mappings_) {
    if (m.registered) UnregisterHostMemory(m.addr);
    ::munmap(m.addr, m.length);
  }
  mappings_.clear();
  if (buffer_ != nullptr) allocator_->Free(buffer_);
  buffer_ = nullptr;
  allocator_ = nullptr;
  bytes_ = 0;
}

FeatureStore::RowRef FeatureStore::Locate(int64_t global_id) const {
  if (global_id < 0 || global_id >= static_cast<int64_t>(slot_of_.size())) return RowRef{};
  const int32_t slot = slot_of_[static_cast<size_t>(global_id)];
  if (slot < 0) return RowRef{};
  if (mode_ == Mode::kPinned) return RowRef{0, slot};
  const auto t = std::upper_bound(type_offsets_.begin(), type_offsets_.end(), global_id) - type_offsets_.begin() - 1;
  return RowRef{type_table_[static_cast<size_t>(t)], global_id - type_offsets_[static_cast<size_t>(t)]};
}

const float* FeatureStore::Row(int64_t global_id) const {
  const RowRef ref = Locate(global_id);
  if (!ref.found()) return nullptr;
  return tables_[static_cast<size_t>(ref.table)].data + ref.row * feature_dim_;
}

Result<const float*> FeatureStore::CheckedRow(int64_t global_id) const {
  const float* row = Row(global_id);
  if (row == nullptr) {
    return InternalError(
        StrCat("feature store: node id ", global_id, " is not one of the ", num_rows(), " rows this worker serves"));
  }
  return row;
}

Status FeatureStore::Gather(const int64_t* global_ids, int64_t n, float* out) const {
  const auto row_bytes = static_cast<size_t>(feature_dim_) * sizeof(float);
  for (int64_t i = 0; i < n; ++i) {
    const float* row = Row(global_ids[i]);
    if (row == nullptr) {
      return InternalError(StrCat("feature store: node id ", global_ids[i], " at index ", i, " is not one of the ",
                                  num_rows(), " rows this worker serves"));
    }
    std::memcpy(out + i * feature_dim_, row, row_bytes);
  }
  return Status::Ok();
}

}  // namespace tessel::storage
