// WritePartitionFile / ReadPartitionFile: one WorkerPartition per HDF5 file (DIR/part-K.h5).
//
// Layout, in the conventions of the graph file:
//   /partition                attributes format_version, part, num_parts, num_owned, feature_dim,
//                             total_nodes, num_classes, total_train, total_test (int64),
//                             graph_hash (string) and relation_names (string array)
//   /partition/offsets        int64 [num_parts + 1]   the range partition book over new ids
//   /partition/type_offsets   int64 [node types + 1]  node type t has the global ids [off[t], off[t+1])
//   /partition/row_new_id     int64 [num_rows]
//   /partition/row_orig_id    int64 [num_rows]
//   /partition/rel_ptr        int64 [num_relations + 1]
//   /partition/src, dst       int64 [num_edges]       row indices; chunked + deflate when large
//   /partition/features       float32 [num_owned, feature_dim], contiguous; absent when feature_dim is 0
//   /partition/labels         int64 [num_owned]
//   /partition/train, val, test  uint8 [num_owned]
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "core/logging.h"
#include "core/safe_file.h"
#include "storage/hdf5_util.h"
#include "storage/partition.h"

namespace tessel::storage {
namespace {

constexpr int64_t kPartitionFormatVersion = 3;  // 2: type_offsets; 3: graph_hash
constexpr const char* kGroup = "/partition";
// Edge and id arrays longer than this are chunked and compressed; shorter ones stay contiguous.
constexpr size_t kChunkThreshold = size_t{1} << 16;

template <typename T>
Status Write1D(hid_t group, const std::string& name, const std::vector<T>& v, std::string_view file) {
  const h5::Layout layout = v.size() > kChunkThreshold ? h5::Layout::kChunkedDeflate : h5::Layout::kContiguous;
  return h5::WriteArray<T>(group, name, v.data(), {static_cast<hsize_t>(v.size())}, layout,
                           StrCat(file, ": ", kGroup, "/", name));
}

template <typename T>
Status Read1D(hid_t file_id, const std::string& name, std::string_view file, std::vector<T>* out) {
  std::vector<hsize_t> dims;
  return h5::ReadArray<T>(file_id, StrCat(kGroup, "/", name), file, 1, out, &dims);
}

// Everything but the feature rows.
Status WriteContents(const WorkerPartition& p, hid_t file_id, std::string_view file) {
  const std::string where = StrCat(file, ": ", kGroup);
  h5::Group group(H5Gcreate2(file_id, kGroup, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  if (!group.valid()) return h5::WriteError(where, "cannot create group");
  const hid_t g = group.get();
  const std::pair<const char*, int64_t> attrs[] = {{"format_version", kPartitionFormatVersion},
                                                   {"part", p.part},
                                                   {"num_parts", p.num_parts},
                                                   {"num_owned", p.num_owned},
                                                   {"feature_dim", p.feature_dim},
                                                   {"total_nodes", p.total_nodes},
                                                   {"num_classes", p.num_classes},
                                                   {"total_train", p.total_train},
                                                   {"total_test", p.total_test}};
  for (const auto& [name, value] : attrs) TESSEL_RETURN_IF_ERROR(h5::WriteInt64Attribute(g, name, value, where));
  TESSEL_RETURN_IF_ERROR(h5::WriteStringAttribute(g, "graph_hash", p.graph_hash, where));
  TESSEL_RETURN_IF_ERROR(h5::WriteStringArrayAttribute(g, "relation_names", p.relation_names, where));
  TESSEL_RETURN_IF_ERROR(Write1D(g, "offsets", p.offsets, file));
  TESSEL_RETURN_IF_ERROR(Write1D(g, "type_offsets", p.type_offsets, file));
  TESSEL_RETURN_IF_ERROR(Write1D(g, "row_new_id", p.row_new_id, file));
  TESSEL_RETURN_IF_ERROR(Write1D(g, "row_orig_id", p.row_orig_id, file));
  TESSEL_RETURN_IF_ERROR(Write1D(g, "rel_ptr", p.rel_ptr, file));
  TESSEL_RETURN_IF_ERROR(Write1D(g, "src", p.src, file));
  TESSEL_RETURN_IF_ERROR(Write1D(g, "dst", p.dst, file));
  if (p.feature_dim > 0) {  // allocated here, written in place by PartitionFileWriter::WriteRows
    TESSEL_RETURN_IF_ERROR(h5::WriteArray<float>(
        g, "features", nullptr, {static_cast<hsize_t>(p.num_owned), static_cast<hsize_t>(p.feature_dim)},
        h5::Layout::kContiguous, StrCat(where, "/features")));
  }
  TESSEL_RETURN_IF_ERROR(Write1D(g, "labels", p.labels, file));
  TESSEL_RETURN_IF_ERROR(Write1D(g, "train", p.train_mask, file));
  TESSEL_RETURN_IF_ERROR(Write1D(g, "val", p.val_mask, file));
  TESSEL_RETURN_IF_ERROR(Write1D(g, "test", p.test_mask, file));
  return Status::Ok();
}

Result<int32_t> ReadInt32Attribute(hid_t obj, const std::string& name, std::string_view where) {
  TESSEL_ASSIGN_OR_RETURN(int64_t v, h5::ReadInt64Attribute(obj, name, where));
  if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max()) {
    return BadDataError(StrCat(where, ": attribute ", name, " = ", v, " is out of range"));
  }
  return static_cast<int32_t>(v);
}

}  // namespace

Status WritePartitionFile(const WorkerPartition& p, const std::string& path) {
  // Held, every row of them (Create takes empty features as features to come).
  if (static_cast<int64_t>(p.features.size()) != p.num_owned * p.feature_dim) {
    return BadDataError(
        StrCat("refusing to write ", path, ": features size ", p.features.size(), " is not num_owned * feature_dim"));
  }
  TESSEL_ASSIGN_OR_RETURN(PartitionFileWriter w, PartitionFileWriter::Create(p, path));
  TESSEL_RETURN_IF_ERROR(w.WriteRows(0, p.features.data(), p.feature_dim > 0 ? p.num_owned : 0));
  return w.Commit();
}

Result<PartitionFileWriter> PartitionFileWriter::Create(const WorkerPartition& p, const std::string& path) {
  TESSEL_RETURN_IF_ERROR(ValidatePartition(p, p.features.empty() ? PartFeatures::kToCome : PartFeatures::kHeld)
                             .WithContext(StrCat("refusing to write ", path)));
  PartitionFileWriter w;
  w.path_ = path;
  w.tmp_ = TemporaryPathFor(path);  // created exclusively: a planted link is refused
  w.feature_dim_ = p.feature_dim;
  h5::ScopedErrorSilencer silence;
  Status st;
  {
    h5::PropList fapl(H5Pcreate(H5P_FILE_ACCESS));
    // As for graph files: v1.8 object headers hold attributes beyond 64 KiB (long relation_names lists).
    H5Pset_libver_bounds(fapl.get(), H5F_LIBVER_V18, H5F_LIBVER_LATEST);
    h5::File file(H5Fcreate(w.tmp_.c_str(), H5F_ACC_EXCL, H5P_DEFAULT, fapl.get()));
    if (!file.valid())
      return StorageError(StrCat("cannot create the partition file: ", DescribeCreateFailure(w.tmp_, errno)));
    st = WriteContents(p, file.get(), path);
    if (st.ok() && p.feature_dim > 0 && p.num_owned > 0) {
      h5::Dataset d(H5Dopen2(file.get(), StrCat(kGroup, "/features").c_str(), H5P_DEFAULT));
      const haddr_t at = d.valid() ? H5Dget_offset(d.get()) : HADDR_UNDEF;
      if (at == HADDR_UNDEF) st = h5::WriteError(w.tmp_, "the features were not allocated in place");
      w.data_offset_ = static_cast<int64_t>(at);
    }
    if (st.ok() && file.Close() < 0) st = h5::WriteError(w.tmp_, "cannot close (flush) file");
  }
  if (st.ok()) {
    w.fd_ = ::open(w.tmp_.c_str(), O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
    if (w.fd_ < 0) st = StorageError(StrCat("cannot reopen ", w.tmp_, ": ", std::strerror(errno)));
  }
  if (!st.ok()) {
    std::remove(w.tmp_.c_str());
    return st;
  }
  w.written_.assign(static_cast<size_t>(p.feature_dim > 0 ? p.num_owned : 0), false);
  return w;
}

PartitionFileWriter::PartitionFileWriter(PartitionFileWriter&& o) noexcept
    : path_(std::move(o.path_)),
      tmp_(std::move(o.tmp_)),
      fd_(o.fd_),
      data_offset_(o.data_offset_),
      feature_dim_(o.feature_dim_),
      rows_written_(o.rows_written_),
      written_(std::move(o.written_)) {
  o.fd_ = -1;
  o.tmp_.clear();
}

PartitionFileWriter::~PartitionFileWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!tmp_.empty()) std::remove(tmp_.c_str());
}

Status PartitionFileWriter::WriteRows(int64_t first, const float* rows, int64_t count) {
  if (count == 0) return Status::Ok();
  if (fd_ < 0 || first < 0 || count < 0 || first + count > static_cast<int64_t>(written_.size())) {
    return InternalError(StrCat(path_, ": feature rows [", first, ", ", first + count, ") are not rows of its ",
                                written_.size(), " owned rows"));
  }
  const auto row_bytes = static_cast<size_t>(feature_dim_) * sizeof(float);
  const auto* bytes = reinterpret_cast<const char*>(rows);
  size_t left = static_cast<size_t>(count) * row_bytes;
  auto at = static_cast<off_t>(data_offset_ + first * static_cast<int64_t>(row_bytes));
  while (left > 0) {
    const ssize_t n = ::pwrite(fd_, bytes, left, at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return StorageError(StrCat(tmp_, ": cannot write features: ", std::strerror(n < 0 ? errno : EIO)));
    }
    bytes += n;
    left -= static_cast<size_t>(n);
    at += n;
  }
  for (int64_t i = first; i < first + count; ++i) {
    if (!written_[static_cast<size_t>(i)]) ++rows_written_;
    written_[static_cast<size_t>(i)] = true;
  }
  return Status::Ok();
}

Status PartitionFileWriter::Commit() {
  if (fd_ < 0) return InternalError(StrCat(path_, ": committed twice"));
  if (rows_written_ != static_cast<int64_t>(written_.size())) {
    return InternalError(StrCat(path_, ": ", written_.size() - static_cast<size_t>(rows_written_), " of its ",
                                written_.size(), " owned rows' features were never written"));
  }
  Status st;
  if (::fsync(fd_) != 0) st = StorageError(StrCat(tmp_, ": fsync: ", std::strerror(errno)));
  if (::close(fd_) != 0 && st.ok()) st = StorageError(StrCat(tmp_, ": close: ", std::strerror(errno)));
  fd_ = -1;
  if (st.ok()) st = CheckNotSymlink(path_);
  if (st.ok() && std::rename(tmp_.c_str(), path_.c_str()) != 0) {
    st = StorageError(StrCat("cannot rename ", tmp_, " to ", path_));
  }
  if (st.ok()) tmp_.clear();  // in place: nothing for the destructor to remove
  return st;
}

Result<WorkerPartition> ReadPartitionFile(const std::string& path) {
  h5::ScopedErrorSilencer silence;
  if (H5Fis_hdf5(path.c_str()) <= 0) {
    return BadDataError(StrCat(path, ": cannot open partition file (missing, unreadable or not HDF5)"));
  }
  h5::File file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  if (!file.valid()) return h5::ReadError(path, "cannot open partition file");
  TESSEL_ASSIGN_OR_RETURN(h5::Group group, h5::OpenGroup(file.get(), kGroup, path));
  const hid_t g = group.get();
  const std::string where = StrCat(path, ": ", kGroup);
  TESSEL_ASSIGN_OR_RETURN(int64_t version, h5::ReadInt64Attribute(g, "format_version", where));
  if (version != kPartitionFormatVersion) {
    return BadDataError(StrCat(where, ": format_version ", version, " is not supported (expected ",
                               kPartitionFormatVersion, "; partition the graph again with this build)"));
  }
  WorkerPartition p;
  TESSEL_ASSIGN_OR_RETURN(p.part, ReadInt32Attribute(g, "part", where));
  TESSEL_ASSIGN_OR_RETURN(p.num_parts, ReadInt32Attribute(g, "num_parts", where));
  TESSEL_ASSIGN_OR_RETURN(p.num_owned, h5::ReadInt64Attribute(g, "num_owned", where));
  TESSEL_ASSIGN_OR_RETURN(p.feature_dim, h5::ReadInt64Attribute(g, "feature_dim", where));
  TESSEL_ASSIGN_OR_RETURN(p.total_nodes, h5::ReadInt64Attribute(g, "total_nodes", where));
  TESSEL_ASSIGN_OR_RETURN(p.num_classes, h5::ReadInt64Attribute(g, "num_classes", where));
  TESSEL_ASSIGN_OR_RETURN(p.total_train, h5::ReadInt64Attribute(g, "total_train", where));
  TESSEL_ASSIGN_OR_RETURN(p.total_test, h5::ReadInt64Attribute(g, "total_test", where));
  TESSEL_ASSIGN_OR_RETURN(p.graph_hash, h5::ReadStringAttribute(g, "graph_hash", where));
  TESSEL_ASSIGN_OR_RETURN(p.relation_names, h5::ReadStringArrayAttribute(g, "relation_names", where));
  const hid_t f = file.get();
  TESSEL_RETURN_IF_ERROR(Read1D(f, "offsets", path, &p.offsets));
  TESSEL_RETURN_IF_ERROR(Read1D(f, "type_offsets", path, &p.type_offsets));
  TESSEL_RETURN_IF_ERROR(Read1D(f, "row_new_id", path, &p.row_new_id));
  TESSEL_RETURN_IF_ERROR(Read1D(f, "row_orig_id", path, &p.row_orig_id));
  TESSEL_RETURN_IF_ERROR(Read1D(f, "rel_ptr", path, &p.rel_ptr));
  TESSEL_RETURN_IF_ERROR(Read1D(f, "src", path, &p.src));
  TESSEL_RETURN_IF_ERROR(Read1D(f, "dst", path, &p.dst));
  if (p.feature_dim > 0) {
    std::vector<hsize_t> dims;
    TESSEL_RETURN_IF_ERROR(h5::ReadArray<float>(f, StrCat(kGroup, "/features"), path, 2, &p.features, &dims));
    // [num_owned, feature_dim]; a part written before 2026-12 carries its halo rows too, which are dropped
    // (the worker takes them from their owners).
    const auto owned = static_cast<hsize_t>(p.num_owned);
    if ((dims[0] != owned && dims[0] != static_cast<hsize_t>(p.row_new_id.size())) ||
        dims[1] != static_cast<hsize_t>(p.feature_dim)) {
      return BadDataError(StrCat(where, "/features: shape [", dims[0], ", ", dims[1], "] is not [num_owned=", owned,
                                 ", feature_dim=", p.feature_dim, "]"));
    }
    p.features.resize(static_cast<size_t>(owned * dims[1]));
    p.features.shrink_to_fit();
  }
  TESSEL_RETURN_IF_ERROR(Read1D(f, "labels", path, &p.labels));
  TESSEL_RETURN_IF_ERROR(Read1D(f, "train", path, &p.train_mask));
  TESSEL_RETURN_IF_ERROR(Read1D(f, "val", path, &p.val_mask));
  TESSEL_RETURN_IF_ERROR(Read1D(f, "test", path, &p.test_mask));
  TESSEL_RETURN_IF_ERROR(ValidatePartition(p).WithContext(path));
  return p;
}

}  // namespace tessel::storage
