#include "storage/checkpoint_shard.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/safe_file.h"
#include "storage/hdf5_util.h"

namespace tessel::storage {
namespace {

constexpr const char* kFormat = "tessel-checkpoint-shard";
constexpr int64_t kFormatVersion = 1;
constexpr hsize_t kChunkBytes = hsize_t{4} << 20;

Result<hid_t> NativeType(DType dtype, std::string_view where) {
  switch (dtype) {
    case DType::kF32:
      return H5T_NATIVE_FLOAT;
    case DType::kF64:
      return H5T_NATIVE_DOUBLE;
    case DType::kI32:
      return H5T_NATIVE_INT32;
    case DType::kI64:
      return H5T_NATIVE_INT64;
    case DType::kU8:
      return H5T_NATIVE_UINT8;
    default:
      return InternalError(StrCat(where, ": a checkpoint cannot hold ", DTypeName(dtype), " tensors"));
  }
}

Result<DType> DTypeOfStored(hid_t type, std::string_view where) {
  if (h5::TypeMatches<float>(type)) return DType::kF32;
  if (h5::TypeMatches<double>(type)) return DType::kF64;
  if (h5::TypeMatches<int32_t>(type)) return DType::kI32;
  if (h5::TypeMatches<int64_t>(type)) return DType::kI64;
  if (h5::TypeMatches<uint8_t>(type)) return DType::kU8;
  return StorageError(StrCat(where, ": unexpected element type ", h5::DescribeType(type)));
}

Status SyncPath(const std::string& path, bool directory) {
  const int fd = ::open(path.c_str(), (directory ? O_DIRECTORY : 0) | O_RDONLY | O_CLOEXEC);
  if (fd < 0) return StorageError(StrCat(path, ": cannot open to sync: ", std::strerror(errno)));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) return StorageError(StrCat(path, ": fsync failed: ", std::strerror(err)));
  return Status();
}

// One tensor as a 1-D dataset (chunked with Fletcher32 unless empty) plus its shape as an attribute.
Status WriteTensor(hid_t file, const NamedTensor& t, const std::string& where) {
  const std::string path = "/tensors/" + t.name;
  TESSEL_ASSIGN_OR_RETURN(hid_t type, NativeType(t.tensor.dtype(), where));
  const hsize_t n = static_cast<hsize_t>(t.tensor.numel());
  h5::Dataspace space(H5Screate_simple(1, &n, nullptr));
  h5::PropList dcpl(H5Pcreate(H5P_DATASET_CREATE));
  h5::PropList lcpl(H5Pcreate(H5P_LINK_CREATE));
  if (!space.valid() || !dcpl.valid() || !lcpl.valid() || H5Pset_create_intermediate_group(lcpl.get(), 1) < 0) {
    return h5::WriteError(where, "cannot create the dataset properties");
  }
  if (n > 0) {
    const hsize_t chunk = std::max<hsize_t>(1, std::min<hsize_t>(n, kChunkBytes / DTypeSize(t.tensor.dtype())));
    if (H5Pset_chunk(dcpl.get(), 1, &chunk) < 0 || H5Pset_fletcher32(dcpl.get()) < 0) {
      return h5::WriteError(where, "cannot set chunking and checksums");
    }
  }
  h5::Dataset d(H5Dcreate2(file, path.c_str(), type, space.get(), lcpl.get(), dcpl.get(), H5P_DEFAULT));
  if (!d.valid()) return h5::WriteError(where, "cannot create dataset " + path);
  if (n > 0 && H5Dwrite(d.get(), type, H5S_ALL, H5S_ALL, H5P_DEFAULT, t.tensor.raw()) < 0) {
    return h5::WriteError(where, "cannot write " + path);
  }
  const std::vector<int64_t>& shape = t.tensor.shape();
  const hsize_t rank = shape.size();
  h5::Dataspace shape_space(rank == 0 ? H5Screate(H5S_NULL) : H5Screate_simple(1, &rank, nullptr));
  h5::Attribute a(H5Acreate2(d.get(), "shape", H5T_NATIVE_INT64, shape_space.get(), H5P_DEFAULT, H5P_DEFAULT));
  if (!a.valid()) return h5::WriteError(where, "cannot write the shape of " + path);
  if (rank > 0 && H5Awrite(a.get(), H5T_NATIVE_INT64, shape.data()) < 0) {
    return h5::WriteError(where, "cannot write the shape of " + path);
  }
  if (d.Close() < 0) return h5::WriteError(where, "cannot close " + path);
  return Status();
}

Result<Tensor> ReadTensor(hid_t file, const std::string& name, const std::string& where) {
  const std::string path = "/tensors/" + name;
  const std::string at = StrCat(where, ": tensor '", name, "'");
  if (!h5::Exists(file, path)) return StorageError(at + " is missing");
  h5::Dataset d(H5Dopen2(file, path.c_str(), H5P_DEFAULT));
  if (!d.valid()) return StorageError(at + ": cannot open (corrupt file?)");
  h5::Datatype type(H5Dget_type(d.get()));
  if (!type.valid()) return StorageError(at + ": cannot read its type (corrupt file?)");
  TESSEL_ASSIGN_OR_RETURN(DType dtype, DTypeOfStored(type.get(), at));
  h5::Dataspace space(H5Dget_space(d.get()));
  const hssize_t n = space.valid() ? H5Sget_simple_extent_npoints(space.get()) : -1;
  if (n < 0) return StorageError(at + ": cannot read its size (corrupt file?)");
  h5::Attribute a(H5Aopen(d.get(), "shape", H5P_DEFAULT));
  if (!a.valid()) return StorageError(at + ": no shape attribute (corrupt file?)");
  h5::Dataspace shape_space(H5Aget_space(a.get()));
  const hssize_t rank = shape_space.valid() ? H5Sget_simple_extent_npoints(shape_space.get()) : -1;
  if (rank < 0 || rank > 8) return StorageError(at + ": bad shape attribute (corrupt file?)");
  std::vector<int64_t> shape(static_cast<size_t>(rank));
  if (rank > 0 && H5Aread(a.get(), H5T_NATIVE_INT64, shape.data()) < 0) {
    return StorageError(at + ": cannot read its shape (corrupt file?)");
  }
  int64_t count = 1;
  for (int64_t s : shape) count = s < 0 ? -1 : count * s;
  if (count != n)
    return StorageError(StrCat(at, ": shape holds ", count, " values but the dataset ", n, " (corrupt file?)"));
  TESSEL_ASSIGN_OR_RETURN(Tensor t, Tensor::Empty(dtype, shape));
  TESSEL_ASSIGN_OR_RETURN(hid_t native, NativeType(dtype, at));
  // Fletcher32 is verified inside H5Dread: a mismatch makes the read fail.
  if (n > 0 && H5Dread(d.get(), native, H5S_ALL, H5S_ALL, H5P_DEFAULT, t.raw()) < 0) {
    const std::string detail = h5::LastErrorMessage();
    return StorageError(StrCat(at, ": checksum mismatch or unreadable data, the shard is damaged",
                               detail.empty() ? "" : " (" + detail + ")"));
  }
  return t;
}

}  // namespace

Status WriteCheckpointShard(const std::string& path, const std::vector<NamedTensor>& tensors) {
  h5::ScopedErrorSilencer silence;
  // A fresh name, created exclusively (HDF5 opens it O_CREAT | O_EXCL: a link planted there is refused).
  const std::string tmp = TemporaryPathFor(path);
  const auto fail = [&](Status st) {
    std::error_code ec;
    std::filesystem::remove(tmp, ec);
    return st;
  };
  {
    h5::File file(H5Fcreate(tmp.c_str(), H5F_ACC_EXCL, H5P_DEFAULT, H5P_DEFAULT));
    if (!file.valid()) {
      const int err = errno;
      // Not ours to remove: whatever is at the name was there before.
      return StorageError(StrCat("cannot create the checkpoint shard: ", DescribeCreateFailure(tmp, err)));
    }
    std::vector<std::string> names;
    for (const NamedTensor& t : tensors) {
      Status st = WriteTensor(file.get(), t, path);
      if (!st.ok()) return fail(st);
      names.push_back(t.name);
    }
    Status st = h5::WriteStringAttribute(file.get(), "format", kFormat, path);
    if (st.ok()) st = h5::WriteInt64Attribute(file.get(), "format_version", kFormatVersion, path);
    if (st.ok() && !names.empty()) st = h5::WriteStringArrayAttribute(file.get(), "tensors", names, path);
    if (!st.ok()) return fail(st);
    if (file.Close() < 0) return fail(h5::WriteError(path, "cannot close (disk full?)"));
  }
  Status st = SyncPath(tmp, false);
  if (st.ok()) st = CheckNotSymlink(path);
  if (!st.ok()) return fail(st);
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return fail(StorageError(StrCat("cannot rename ", tmp, " to ", path, ": ", ec.message())));
  const std::string dir = std::filesystem::path(path).parent_path().string();
  return SyncPath(dir.empty() ? "." : dir, true);
}

Result<std::vector<NamedTensor>> ReadCheckpointShard(const std::string& path) {
  h5::ScopedErrorSilencer silence;
  auto opened = h5::OpenFileReadOnly(path);
  if (!opened.ok()) return StorageError(opened.status().message());
  h5::File file = std::move(opened).value();
  auto format = h5::ReadStringAttribute(file.get(), "format", path);
  if (!format.ok() || *format != kFormat) return StorageError(StrCat(path, ": not a Tessel checkpoint shard"));
  auto version = h5::ReadInt64Attribute(file.get(), "format_version", path);
  if (!version.ok() || *version != kFormatVersion) {
    return StorageError(StrCat(path, ": checkpoint shard format version ", version.ok() ? *version : -1,
                               ", this Tessel reads ", kFormatVersion));
  }
  std::vector<std::string> names;
  if (h5::Exists(file.get(), "/tensors")) {
    auto listed = h5::ReadStringArrayAttribute(file.get(), "tensors", path);
    if (!listed.ok()) return StorageError(listed.status().message());
    names = std::move(listed).value();
  }
  std::vector<NamedTensor> out;
  for (const std::string& name : names) {
    TESSEL_ASSIGN_OR_RETURN(Tensor t, ReadTensor(file.get(), name, path));
    out.push_back({name, std::move(t)});
  }
  return out;
}

Result<FileDigest> DigestFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return StorageError(StrCat(path, ": cannot open: ", std::strerror(errno)));
  FileDigest d;
  uLong crc = crc32(0L, Z_NULL, 0);
  std::vector<unsigned char> buf(size_t{1} << 20);
  while (true) {
    const ssize_t got = ::read(fd, buf.data(), buf.size());
    if (got < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      return StorageError(StrCat(path, ": read failed: ", std::strerror(err)));
    }
    if (got == 0) break;
    crc = crc32(crc, buf.data(), static_cast<uInt>(got));
    d.bytes += got;
  }
  ::close(fd);
  d.crc32 = static_cast<uint32_t>(crc);
  return d;
}

std::string CheckpointStepDir(const std::string& dir, int64_t step) { return StrCat(dir, "/step-", step); }
std::string CheckpointShardPath(const std::string& step_dir, int32_t worker) {
  return StrCat(step_dir, "/worker-", worker, ".h5");
}

}  // namespace tessel::storage
