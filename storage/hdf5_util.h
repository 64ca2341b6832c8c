// RAII over HDF5 C handles, plus the few typed read/write helpers that every HDF5 file in Tessel uses
// (graph files, partition files, spill files).
//
// Ownership: each Hdf5Handle owns one hid_t and closes it in its destructor; it is move-only.
// Thread safety: Debian's HDF5 is built thread-safe, so these may be called from any thread, but an
// open handle belongs to whoever holds it. Failure: the helpers return Status; errors name `where`
// (usually "file.h5: /dataset/path"). Read failures are kBadData, write failures kStorage.
#pragma once

#include <hdf5.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <new>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/logging.h"
#include "core/status.h"

namespace tessel::storage::h5 {

template <herr_t (*CloseFn)(hid_t)>
class Hdf5Handle {
 public:
  Hdf5Handle() = default;
  explicit Hdf5Handle(hid_t id) : id_(id) {}
  ~Hdf5Handle() { Reset(); }
  Hdf5Handle(Hdf5Handle&& other) noexcept : id_(std::exchange(other.id_, H5I_INVALID_HID)) {}
  Hdf5Handle& operator=(Hdf5Handle&& other) noexcept {
    if (this != &other) {
      Reset();
      id_ = std::exchange(other.id_, H5I_INVALID_HID);
    }
    return *this;
  }
  Hdf5Handle(const Hdf5Handle&) = delete;
  Hdf5Handle& operator=(const Hdf5Handle&) = delete;

  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }
  // Closes now and reports whether HDF5 could (a file close flushes, so it can fail on a full disk).
  herr_t Close() {
    herr_t rc = 0;
    if (valid()) rc = CloseFn(id_);
    id_ = H5I_INVALID_HID;
    return rc;
  }
  void Reset() { (void)Close(); }

 private:
  hid_t id_ = H5I_INVALID_HID;
};

using File = Hdf5Handle<H5Fclose>;
using Group = Hdf5Handle<H5Gclose>;
using Dataset = Hdf5Handle<H5Dclose>;
using Dataspace = Hdf5Handle<H5Sclose>;
using Datatype = Hdf5Handle<H5Tclose>;
using Attribute = Hdf5Handle<H5Aclose>;
using PropList = Hdf5Handle<H5Pclose>;
using Object = Hdf5Handle<H5Oclose>;

// Turns off HDF5's printing of its error stack on this thread for the scope, so users see only our
// message; restores the previous handler on exit.
class ScopedErrorSilencer {
 public:
  ScopedErrorSilencer() {
    H5Eget_auto2(H5E_DEFAULT, &old_func_, &old_data_);
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  }
  ~ScopedErrorSilencer() { H5Eset_auto2(H5E_DEFAULT, old_func_, old_data_); }
  ScopedErrorSilencer(const ScopedErrorSilencer&) = delete;
  ScopedErrorSilencer& operator=(const ScopedErrorSilencer&) = delete;

 private:
  H5E_auto2_t old_func_ = nullptr;
  void* old_data_ = nullptr;
};

// The innermost message on HDF5's error stack of this thread ("" when empty), to append to ours.
inline std::string LastErrorMessage() {
  std::string msg;
  auto walk = [](unsigned, const H5E_error2_t* err, void* data) -> herr_t {
    auto* out = static_cast<std::string*>(data);
    if (err->desc != nullptr && err->desc[0] != '\0') *out = err->desc;  // keep the innermost
    return 0;
  };
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, walk, &msg);
  return msg;
}

inline Status ReadError(std::string_view where, std::string_view what) {
  std::string detail = LastErrorMessage();
  return BadDataError(StrCat(where, ": ", what, detail.empty() ? "" : " (", detail, detail.empty() ? "" : ")"));
}
inline Status WriteError(std::string_view where, std::string_view what) {
  std::string detail = LastErrorMessage();
  return StorageError(StrCat(where, ": ", what, detail.empty() ? "" : " (", detail, detail.empty() ? "" : ")"));
}

// ---- element types ----------------------------------------------------------------------------

template <typename T>
struct TypeTraits;
template <>
struct TypeTraits<int64_t> {
  static hid_t Native() { return H5T_NATIVE_INT64; }
  static constexpr H5T_class_t kClass = H5T_INTEGER;
  static constexpr const char* kName = "int64";
};
template <>
struct TypeTraits<int32_t> {
  static hid_t Native() { return H5T_NATIVE_INT32; }
  static constexpr H5T_class_t kClass = H5T_INTEGER;
  static constexpr const char* kName = "int32";
};
template <>
struct TypeTraits<uint8_t> {
  static hid_t Native() { return H5T_NATIVE_UINT8; }
  static constexpr H5T_class_t kClass = H5T_INTEGER;
  static constexpr const char* kName = "uint8";
};
template <>
struct TypeTraits<float> {
  static hid_t Native() { return H5T_NATIVE_FLOAT; }
  static constexpr H5T_class_t kClass = H5T_FLOAT;
  static constexpr const char* kName = "float32";
};
template <>
struct TypeTraits<double> {
  static hid_t Native() { return H5T_NATIVE_DOUBLE; }
  static constexpr H5T_class_t kClass = H5T_FLOAT;
  static constexpr const char* kName = "float64";
};

// "int64", "float32", "string", ... for messages and dumps.
inline std::string DescribeType(hid_t type) {
  const H5T_class_t cls = H5Tget_class(type);
  const size_t size = H5Tget_size(type);
  switch (cls) {
    case H5T_INTEGER:
      return StrCat(H5Tget_sign(type) == H5T_SGN_NONE ? "uint" : "int", size * 8);
    case H5T_FLOAT:
      return StrCat("float", size * 8);
    case H5T_STRING:
      return H5Tis_variable_str(type) > 0 ? "string" : StrCat("string[", size, "]");
    case H5T_COMPOUND:
      return "compound";
    case H5T_ENUM:
      return "enum";
    case H5T_ARRAY:
      return "array";
    case H5T_VLEN:
      return "vlen";
    case H5T_OPAQUE:
      return "opaque";
    default:
      return "other";
  }
}

// True if `type` stores T exactly (same class, size and signedness), so reading it loses nothing.
template <typename T>
bool TypeMatches(hid_t type) {
  if (H5Tget_class(type) != TypeTraits<T>::kClass || H5Tget_size(type) != sizeof(T)) return false;
  if constexpr (TypeTraits<T>::kClass == H5T_INTEGER) {
    const bool is_signed = H5Tget_sign(type) == H5T_SGN_2;
    return is_signed == std::is_signed_v<T>;
  }
  return true;
}

// ---- existence and opening --------------------------------------------------------------------

// Opens an existing file read-only. A missing path, something that is not a regular file, a file that
// is not HDF5 and one that HDF5 cannot open (truncated, corrupt) are kBadData naming `path`.
// Call it inside a ScopedErrorSilencer.
inline Result<File> OpenFileReadOnly(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return BadDataError(StrCat(path, ": cannot open: ", std::strerror(errno)));
  if (!S_ISREG(st.st_mode)) return BadDataError(StrCat(path, ": not a regular file"));
  if (H5Fis_hdf5(path.c_str()) <= 0) return BadDataError(StrCat(path, ": not an HDF5 file"));
  File file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  if (!file.valid()) return ReadError(path, "cannot open (truncated or corrupt HDF5 file?)");
  return file;
}

// True if `path` (absolute, e.g. "/nodes/entity") names a link that resolves, checking each prefix.
inline bool Exists(hid_t loc, const std::string& path) {
  size_t pos = 0;
  while (true) {
    pos = path.find('/', pos + 1);
    const std::string prefix = path.substr(0, pos);
    if (!prefix.empty() && prefix != "/" && H5Lexists(loc, prefix.c_str(), H5P_DEFAULT) <= 0) return false;
    if (pos == std::string::npos) return true;
  }
}

inline Result<Group> OpenGroup(hid_t loc, const std::string& path, std::string_view file) {
  if (!Exists(loc, path)) return BadDataError(StrCat(file, ": ", path, ": missing group"));
  Group g(H5Gopen2(loc, path.c_str(), H5P_DEFAULT));
  if (!g.valid()) return ReadError(StrCat(file, ": ", path), "not a readable group");
  return g;
}

inline Result<Dataset> OpenDataset(hid_t loc, const std::string& path, std::string_view file) {
  if (!Exists(loc, path)) return BadDataError(StrCat(file, ": ", path, ": missing dataset"));
  Dataset d(H5Dopen2(loc, path.c_str(), H5P_DEFAULT));
  if (!d.valid()) return ReadError(StrCat(file, ": ", path), "not a readable dataset");
  return d;
}

// Dimensions of a simple dataspace; kBadData for scalar/null spaces when a rank is expected.
inline Result<std::vector<hsize_t>> Shape(hid_t dataset, std::string_view where) {
  Dataspace space(H5Dget_space(dataset));
  if (!space.valid()) return ReadError(where, "cannot read the dataspace");
  const int rank = H5Sget_simple_extent_ndims(space.get());
  if (rank < 0) return ReadError(where, "bad dataspace");
  std::vector<hsize_t> dims(static_cast<size_t>(rank));
  if (rank > 0 && H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr) < 0) {
    return ReadError(where, "bad dataspace");
  }
  return dims;
}

// ---- datasets -----------------------------------------------------------------------------------

// Reads a whole dataset of element type T with exactly `rank` dimensions. `*dims` receives the shape.
// A wrong type class/size, rank or an unreadable (truncated, corrupt) extent is kBadData.
template <typename T>
Status ReadArray(hid_t loc, const std::string& path, std::string_view file, int rank, std::vector<T>* out,
                 std::vector<hsize_t>* dims) {
  const std::string where = StrCat(file, ": ", path);
  TESSEL_ASSIGN_OR_RETURN(Dataset d, OpenDataset(loc, path, file));
  Datatype type(H5Dget_type(d.get()));
  if (!type.valid()) return ReadError(where, "cannot read the datatype");
  if (!TypeMatches<T>(type.get())) {
    return BadDataError(StrCat(where, ": expected ", TypeTraits<T>::kName, ", found ", DescribeType(type.get())));
  }
  TESSEL_ASSIGN_OR_RETURN(*dims, Shape(d.get(), where));
  if (static_cast<int>(dims->size()) != rank) {
    return BadDataError(StrCat(where, ": expected rank ", rank, ", found rank ", dims->size()));
  }
  uint64_t n = 1;
  for (hsize_t dim : *dims) {
    if (dim != 0 && n > (uint64_t{1} << 62) / dim) return BadDataError(StrCat(where, ": absurd size"));
    n *= dim;
  }
  try {
    out->assign(n, T{});
  } catch (const std::bad_alloc&) {
    return StorageError(StrCat(where, ": out of memory allocating ", n, " elements"));
  }
  if (n > 0 && H5Dread(d.get(), TypeTraits<T>::Native(), H5S_ALL, H5S_ALL, H5P_DEFAULT, out->data()) < 0) {
    return ReadError(where, "cannot read data (truncated or corrupt file?)");
  }
  return Status::Ok();
}

// Reads a scalar (or one-element) dataset of type T.
template <typename T>
Result<T> ReadScalar(hid_t loc, const std::string& path, std::string_view file) {
  const std::string where = StrCat(file, ": ", path);
  TESSEL_ASSIGN_OR_RETURN(Dataset d, OpenDataset(loc, path, file));
  Datatype type(H5Dget_type(d.get()));
  if (!type.valid() || !TypeMatches<T>(type.get())) {
    return BadDataError(StrCat(where, ": expected a scalar ", TypeTraits<T>::kName,
                               type.valid() ? StrCat(", found ", DescribeType(type.get())) : ""));
  }
  TESSEL_ASSIGN_OR_RETURN(std::vector<hsize_t> dims, Shape(d.get(), where));
  if (!(dims.empty() || (dims.size() == 1 && dims[0] == 1))) {
    return BadDataError(StrCat(where, ": expected a scalar, found rank ", dims.size()));
  }
  T value{};
  if (H5Dread(d.get(), TypeTraits<T>::Native(), H5S_ALL, H5S_ALL, H5P_DEFAULT, &value) < 0) {
    return ReadError(where, "cannot read data (truncated or corrupt file?)");
  }
  return value;
}

enum class Layout { kContiguous, kChunkedDeflate };

// Writes a dataset of shape `dims` from `data` (row-major). kChunkedDeflate uses shuffle + deflate
// level 1 in chunks of up to 1 Mi elements; kContiguous keeps the bytes mappable in place. A null `data`
// only creates the dataset (contiguous: its bytes allocated, not filled, for the caller to write in place).
template <typename T>
Status WriteArray(hid_t loc, const std::string& name, const T* data, const std::vector<hsize_t>& dims, Layout layout,
                  std::string_view where) {
  Dataspace space(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr));
  if (!space.valid()) return WriteError(where, "cannot create dataspace");
  PropList dcpl(H5Pcreate(H5P_DATASET_CREATE));
  if (!dcpl.valid()) return WriteError(where, "cannot create property list");
  hsize_t total = 1;
  for (hsize_t dim : dims) total *= dim;
  if (layout == Layout::kChunkedDeflate && total > 0 && !dims.empty()) {
    std::vector<hsize_t> chunk = dims;
    hsize_t row = 1;
    for (size_t i = 1; i < dims.size(); ++i) row *= dims[i];
    chunk[0] = std::max<hsize_t>(1, std::min<hsize_t>(dims[0], (hsize_t{1} << 20) / std::max<hsize_t>(row, 1)));
    if (H5Pset_chunk(dcpl.get(), static_cast<int>(chunk.size()), chunk.data()) < 0 || H5Pset_shuffle(dcpl.get()) < 0 ||
        H5Pset_deflate(dcpl.get(), 1) < 0) {
      return WriteError(where, "cannot set chunking/compression");
    }
  } else {
    H5Pset_layout(dcpl.get(), H5D_CONTIGUOUS);
    H5Pset_alloc_time(dcpl.get(), H5D_ALLOC_TIME_EARLY);
    H5Pset_fill_time(dcpl.get(), H5D_FILL_TIME_NEVER);
  }
  Dataset d(H5Dcreate2(loc, name.c_str(), TypeTraits<T>::Native(), space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT));
  if (!d.valid()) return WriteError(where, "cannot create dataset");
  if (total > 0 && data != nullptr &&
      H5Dwrite(d.get(), TypeTraits<T>::Native(), H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0) {
    return WriteError(where, "cannot write data");
  }
  if (d.Close() < 0) return WriteError(where, "cannot close dataset");
  return Status::Ok();
}

template <typename T>
Status WriteScalar(hid_t loc, const std::string& name, T value, std::string_view where) {
  Dataspace space(H5Screate(H5S_SCALAR));
  Dataset d(H5Dcreate2(loc, name.c_str(), TypeTraits<T>::Native(), space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  if (!d.valid()) return WriteError(where, "cannot create dataset");
  if (H5Dwrite(d.get(), TypeTraits<T>::Native(), H5S_ALL, H5S_ALL, H5P_DEFAULT, &value) < 0) {
    return WriteError(where, "cannot write data");
  }
  return Status::Ok();
}

// ---- attributes ---------------------------------------------------------------------------------

// Variable-length strings, used only to read files written elsewhere (h5py writes them by default).
inline Datatype MakeVariableStringType() {
  Datatype t(H5Tcopy(H5T_C_S1));
  H5Tset_size(t.get(), H5T_VARIABLE);
  H5Tset_cset(t.get(), H5T_CSET_UTF8);
  return t;
}

// Tessel writes fixed-length, NUL-terminated UTF-8 strings: reading them never touches HDF5's global
// heap, whose reader crashes on corrupt files (H5HG_read copies with unchecked lengths).
inline Datatype MakeFixedStringType(size_t max_len) {
  Datatype t(H5Tcopy(H5T_C_S1));
  H5Tset_size(t.get(), max_len + 1);
  H5Tset_strpad(t.get(), H5T_STR_NULLTERM);
  H5Tset_cset(t.get(), H5T_CSET_UTF8);
  return t;
}

enum class StringShape { kScalar, kArray };

inline Status WriteStringsAttribute(hid_t obj, const std::string& name, const std::vector<std::string>& values,
                                    StringShape shape, std::string_view where) {
  size_t max_len = 0;
  for (const auto& v : values) max_len = std::max(max_len, v.size());
  Datatype type = MakeFixedStringType(max_len);
  const hsize_t n = values.size();
  Dataspace space(shape == StringShape::kScalar ? H5Screate(H5S_SCALAR) : H5Screate_simple(1, &n, nullptr));
  Attribute a(H5Acreate2(obj, name.c_str(), type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT));
  std::vector<char> buf(values.size() * (max_len + 1), '\0');
  for (size_t i = 0; i < values.size(); ++i)
    std::copy(values[i].begin(), values[i].end(), buf.begin() + i * (max_len + 1));
  if (!a.valid() || (n > 0 && H5Awrite(a.get(), type.get(), buf.data()) < 0)) {
    return WriteError(where, StrCat("cannot write attribute ", name));
  }
  return Status::Ok();
}

inline Status WriteStringAttribute(hid_t obj, const std::string& name, const std::string& value,
                                   std::string_view where) {
  return WriteStringsAttribute(obj, name, {value}, StringShape::kScalar, where);
}

inline Status WriteStringArrayAttribute(hid_t obj, const std::string& name, const std::vector<std::string>& values,
                                        std::string_view where) {
  return WriteStringsAttribute(obj, name, values, StringShape::kArray, where);
}

inline Status WriteInt64Attribute(hid_t obj, const std::string& name, int64_t value, std::string_view where) {
  Dataspace space(H5Screate(H5S_SCALAR));
  Attribute a(H5Acreate2(obj, name.c_str(), H5T_NATIVE_INT64, space.get(), H5P_DEFAULT, H5P_DEFAULT));
  if (!a.valid() || H5Awrite(a.get(), H5T_NATIVE_INT64, &value) < 0) {
    return WriteError(where, StrCat("cannot write attribute ", name));
  }
  return Status::Ok();
}

inline Result<Attribute> OpenAttribute(hid_t obj, const std::string& name, std::string_view where) {
  if (H5Aexists(obj, name.c_str()) <= 0) return BadDataError(StrCat(where, ": missing attribute ", name));
  Attribute a(H5Aopen(obj, name.c_str(), H5P_DEFAULT));
  if (!a.valid()) return ReadError(where, StrCat("cannot open attribute ", name));
  return a;
}

// Reads a string attribute, scalar or array, variable- or fixed-length. kBadData on any other type.
inline Result<std::vector<std::string>> ReadStrings(hid_t attr, std::string_view where, const std::string& name) {
  const std::string w = StrCat(where, ": attribute ", name);
  Datatype type(H5Aget_type(attr));
  if (!type.valid() || H5Tget_class(type.get()) != H5T_STRING) {
    return BadDataError(
        StrCat(w, ": expected a string", type.valid() ? StrCat(", found ", DescribeType(type.get())) : ""));
  }
  Dataspace space(H5Aget_space(attr));
  const hssize_t n = space.valid() ? H5Sget_simple_extent_npoints(space.get()) : -1;
  if (n < 0 || n > (hssize_t{1} << 32)) return ReadError(w, "bad dataspace");
  std::vector<std::string> out;
  out.reserve(static_cast<size_t>(n));
  if (n == 0) return out;
  if (H5Tis_variable_str(type.get()) > 0) {
    Datatype mem = MakeVariableStringType();
    std::vector<char*> ptrs(static_cast<size_t>(n), nullptr);
    if (H5Aread(attr, mem.get(), ptrs.data()) < 0) return ReadError(w, "cannot read");
    for (char* p : ptrs) out.emplace_back(p ? p : "");
    H5Dvlen_reclaim(mem.get(), space.get(), H5P_DEFAULT, ptrs.data());
  } else {
    const size_t size = H5Tget_size(type.get());
    if (size == 0 || size > (size_t{1} << 20)) return ReadError(w, "bad string size");
    std::vector<char> buf(size * static_cast<size_t>(n));
    if (H5Aread(attr, type.get(), buf.data()) < 0) return ReadError(w, "cannot read");
    for (hssize_t i = 0; i < n; ++i) {
      const char* p = buf.data() + static_cast<size_t>(i) * size;
      size_t len = 0;
      while (len < size && p[len] != '\0') ++len;
      out.emplace_back(p, len);
    }
  }
  return out;
}

inline Result<std::string> ReadStringAttribute(hid_t obj, const std::string& name, std::string_view where) {
  TESSEL_ASSIGN_OR_RETURN(Attribute a, OpenAttribute(obj, name, where));
  TESSEL_ASSIGN_OR_RETURN(std::vector<std::string> values, ReadStrings(a.get(), where, name));
  if (values.size() != 1) {
    return BadDataError(StrCat(where, ": attribute ", name, ": expected one string, found ", values.size()));
  }
  return std::move(values[0]);
}

inline Result<std::vector<std::string>> ReadStringArrayAttribute(hid_t obj, const std::string& name,
                                                                 std::string_view where) {
  TESSEL_ASSIGN_OR_RETURN(Attribute a, OpenAttribute(obj, name, where));
  return ReadStrings(a.get(), where, name);
}

inline Result<int64_t> ReadInt64Attribute(hid_t obj, const std::string& name, std::string_view where) {
  TESSEL_ASSIGN_OR_RETURN(Attribute a, OpenAttribute(obj, name, where));
  Datatype type(H5Aget_type(a.get()));
  Dataspace space(H5Aget_space(a.get()));
  if (!type.valid() || H5Tget_class(type.get()) != H5T_INTEGER || !space.valid() ||
      H5Sget_simple_extent_npoints(space.get()) != 1) {
    return BadDataError(StrCat(where, ": attribute ", name, ": expected a scalar integer"));
  }
  int64_t value = 0;
  if (H5Aread(a.get(), H5T_NATIVE_INT64, &value) < 0) return ReadError(where, StrCat("cannot read attribute ", name));
  return value;
}

}  // namespace tessel::storage::h5
