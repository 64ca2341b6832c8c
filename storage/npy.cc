#include "storage/npy.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <string_view>
#include <type_traits>
#include <utility>

#include "core/logging.h"

namespace tessel::storage {
namespace {

constexpr std::string_view kMagic = "\x93NUMPY";

Status Bad(const std::string& path, std::string_view why) { return BadDataError(StrCat(path, ": ", why)); }

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

// The text after `key` (a quoted dict key) and its colon in the header dict, or npos.
size_t ValueAt(std::string_view dict, std::string_view key) {
  for (const char quote : {'\'', '"'}) {
    const std::string quoted = StrCat(std::string(1, quote), key, std::string(1, quote));
    size_t at = dict.find(quoted);
    if (at == std::string_view::npos) continue;
    at = dict.find(':', at + quoted.size());
    if (at == std::string_view::npos) return at;
    ++at;
    while (at < dict.size() && dict[at] == ' ') ++at;
    return at;
  }
  return std::string_view::npos;
}

Status ParseDict(const std::string& path, std::string_view dict, NpyHeader* h) {
  size_t at = ValueAt(dict, "descr");
  if (at == std::string_view::npos) return Bad(path, "the .npy header has no 'descr'");
  if (dict[at] == '[') return Bad(path, "a structured array (its dtype has fields); expected one number per element");
  if (dict[at] != '\'' && dict[at] != '"') return Bad(path, "the .npy header's 'descr' is not a string");
  const size_t end = dict.find(dict[at], at + 1);
  if (end == std::string_view::npos) return Bad(path, "the .npy header's 'descr' is not terminated");
  h->descr = std::string(dict.substr(at + 1, end - at - 1));

  at = ValueAt(dict, "fortran_order");
  if (at == std::string_view::npos) return Bad(path, "the .npy header has no 'fortran_order'");
  if (dict.substr(at, 4) == "True") {
    return Bad(path, "a Fortran-order array; write it in C order (numpy.ascontiguousarray) before numpy.save");
  }
  if (dict.substr(at, 5) != "False") return Bad(path, "the .npy header's 'fortran_order' is neither True nor False");

  at = ValueAt(dict, "shape");
  if (at == std::string_view::npos || dict[at] != '(') return Bad(path, "the .npy header has no 'shape' tuple");
  const size_t close = dict.find(')', at);
  if (close == std::string_view::npos) return Bad(path, "the .npy header's 'shape' is not terminated");
  std::string_view dims = dict.substr(at + 1, close - at - 1);
  while (!dims.empty()) {
    while (!dims.empty() && (dims.front() == ' ' || dims.front() == ',')) dims.remove_prefix(1);
    if (dims.empty()) break;
    int64_t d = 0;
    size_t digits = 0;
    while (digits < dims.size() && dims[digits] >= '0' && dims[digits] <= '9') {
      if (d > (std::numeric_limits<int64_t>::max() - 9) / 10)
        return Bad(path, "a dimension of 'shape' overflows 64 bits");
      d = d * 10 + (dims[digits] - '0');
      ++digits;
    }
    if (digits == 0)
      return Bad(path, StrCat("the .npy header's 'shape' is not a tuple of integers: (",
                              dict.substr(at + 1, close - at - 1), ")"));
    dims.remove_prefix(digits);
    if (!dims.empty() && dims.front() == 'L') dims.remove_prefix(1);  // Python 2's long
    h->shape.push_back(d);
  }

  const std::string& d = h->descr;
  if (d.size() < 3 || std::string_view("<>|=").find(d[0]) == std::string_view::npos) {
    return Bad(path, StrCat("unsupported dtype '", d, "'"));
  }
  h->kind = d[1];
  const std::string_view size = std::string_view(d).substr(2);
  if (size == "1" || size == "2" || size == "4" || size == "8") h->item_bytes = size[0] - '0';
  const bool number = h->kind == 'i' || h->kind == 'u' || (h->kind == 'f' && h->item_bytes >= 4) ||
                      (h->kind == 'b' && h->item_bytes == 1);
  if (!number || h->item_bytes == 0) {
    return Bad(path, StrCat("unsupported dtype '", d, "': expected bool, an integer or float32/float64"));
  }
  if (d[0] == '>' && h->item_bytes > 1)
    return Bad(path, StrCat("a big-endian array ('", d, "'); write it little-endian"));
  return Status::Ok();
}

// One element of source type S at `p`, converted to T; false when T cannot hold it.
template <typename T, typename S>
bool ConvertOne(const unsigned char* p, T* out) {
  S s;
  std::memcpy(&s, p, sizeof(S));
  if constexpr (std::is_same_v<T, uint8_t>) {  // a mask
    if (!(s == S(0) || s == S(1))) return false;
    *out = s == S(1) ? 1 : 0;
  } else if constexpr (std::is_integral_v<T>) {
    static_assert(std::is_same_v<T, int64_t>);
    if constexpr (std::is_floating_point_v<S>) {
      return false;
    } else if constexpr (std::is_unsigned_v<S> && sizeof(S) == 8) {
      if (s > static_cast<S>(std::numeric_limits<int64_t>::max())) return false;
      *out = static_cast<int64_t>(s);
    } else {
      *out = static_cast<int64_t>(s);
    }
  } else {
    *out = static_cast<T>(s);
  }
  return true;
}

template <typename T>
using Converter = bool (*)(const unsigned char*, T*);

template <typename T>
Converter<T> ConverterFor(char kind, int32_t bytes) {
  switch (kind) {
    case 'b':
      return &ConvertOne<T, uint8_t>;
    case 'i':
      return bytes == 1   ? &ConvertOne<T, int8_t>
             : bytes == 2 ? &ConvertOne<T, int16_t>
             : bytes == 4 ? &ConvertOne<T, int32_t>
                          : &ConvertOne<T, int64_t>;
    case 'u':
      return bytes == 1   ? &ConvertOne<T, uint8_t>
             : bytes == 2 ? &ConvertOne<T, uint16_t>
             : bytes == 4 ? &ConvertOne<T, uint32_t>
                          : &ConvertOne<T, uint64_t>;
    default:
      return bytes == 4 ? &ConvertOne<T, float> : &ConvertOne<T, double>;
  }
}

template <typename T>
std::string_view TypeName() {
  if constexpr (std::is_same_v<T, float>) return "float32";
  if constexpr (std::is_same_v<T, double>) return "float64";
  if constexpr (std::is_same_v<T, int64_t>) return "int64";
  return "a 0/1 mask";
}

}  // namespace

int64_t NpyHeader::row_width() const {
  int64_t w = 1;
  for (size_t i = 1; i < shape.size(); ++i) w *= shape[i];
  return w;
}

Result<NpyHeader> ReadNpyHeader(const std::string& path) {
  File f(std::fopen(path.c_str(), "rb"));
  if (!f) return BadDataError(StrCat(path, ": cannot open: ", std::strerror(errno)));
  unsigned char lead[12];
  const size_t got = std::fread(lead, 1, sizeof(lead), f.get());
  if (got < 10 || std::memcmp(lead, kMagic.data(), kMagic.size()) != 0) {
    return Bad(path, "not a NumPy .npy file (no \\x93NUMPY magic)");
  }
  const int major = lead[6];
  if (major < 1 || major > 3) return Bad(path, StrCat("unsupported .npy format version ", major, ".", int{lead[7]}));
  int64_t header_len = 0, prefix = 0;
  if (major == 1) {
    header_len = lead[8] | (lead[9] << 8);
    prefix = 10;
  } else {
    if (got < 12) return Bad(path, "truncated .npy header");
    header_len = static_cast<int64_t>(lead[8]) | (static_cast<int64_t>(lead[9]) << 8) |
                 (static_cast<int64_t>(lead[10]) << 16) | (static_cast<int64_t>(lead[11]) << 24);
    prefix = 12;
  }
  if (header_len > (int64_t{1} << 20)) return Bad(path, StrCat("a .npy header of ", header_len, " bytes"));
  std::string dict(static_cast<size_t>(header_len), '\0');
  if (std::fseek(f.get(), prefix, SEEK_SET) != 0 || std::fread(dict.data(), 1, dict.size(), f.get()) != dict.size()) {
    return Bad(path, "truncated .npy header");
  }
  NpyHeader h;
  h.data_offset = prefix + header_len;
  TESSEL_RETURN_IF_ERROR(ParseDict(path, dict, &h));
  int64_t elements = 1;
  for (const int64_t d : h.shape) {
    if (__builtin_mul_overflow(elements, d, &elements)) return Bad(path, "the shape's element count overflows 64 bits");
  }
  int64_t want = 0;
  if (__builtin_mul_overflow(elements, int64_t{h.item_bytes}, &want) ||
      __builtin_add_overflow(want, h.data_offset, &want)) {
    return Bad(path, "the shape's byte count overflows 64 bits");
  }
  struct stat st;
  if (::fstat(::fileno(f.get()), &st) != 0) return StorageError(StrCat(path, ": fstat: ", std::strerror(errno)));
  if (static_cast<int64_t>(st.st_size) != want) {
    return Bad(path, StrCat("has ", st.st_size, " bytes, but its header (dtype '", h.descr, "', shape of ", elements,
                            " elements) says ", want, st.st_size < want ? ": truncated" : ""));
  }
  return h;
}

template <typename T>
Result<NpyHeader> AppendNpyRows(const std::string& path, int64_t first_row, int64_t rows, std::vector<T>* out) {
  TESSEL_ASSIGN_OR_RETURN(NpyHeader h, ReadNpyHeader(path));
  if (rows < 0) rows = h.rows() - first_row;
  if (first_row < 0 || rows < 0 || first_row + rows > h.rows()) {
    return UsageError(StrCat(path, ": rows [", first_row, ", ", first_row + rows, ") are outside its ", h.rows()));
  }
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, uint8_t>) {
    if (h.kind == 'f') return Bad(path, StrCat("dtype '", h.descr, "' holds floating-point values; expected integers"));
  }
  const int64_t skip = first_row * h.row_width();
  File f(std::fopen(path.c_str(), "rb"));
  if (!f || std::fseek(f.get(), static_cast<long>(h.data_offset + skip * h.item_bytes), SEEK_SET) != 0) {
    return StorageError(StrCat(path, ": cannot read: ", std::strerror(errno)));
  }
  const int64_t elements = rows * h.row_width();
  const Converter<T> convert = ConverterFor<T>(h.kind, h.item_bytes);
  const size_t base = out->size();
  out->resize(base + static_cast<size_t>(elements));
  T* dst = out->data() + base;
  constexpr int64_t kBlock = int64_t{1} << 20;
  std::vector<unsigned char> block(static_cast<size_t>(kBlock));
  const int64_t per_block = kBlock / h.item_bytes;
  for (int64_t done = 0; done < elements;) {
    const int64_t n = std::min(per_block, elements - done);
    const size_t bytes = static_cast<size_t>(n * h.item_bytes);
    if (std::fread(block.data(), 1, bytes, f.get()) != bytes) {
      out->resize(base);
      return StorageError(StrCat(path, ": read failed at element ", skip + done, ": ", std::strerror(errno)));
    }
    for (int64_t i = 0; i < n; ++i) {
      if (!convert(block.data() + i * h.item_bytes, dst + done + i)) {
        out->resize(base);
        return Bad(path, StrCat("element ", skip + done + i, " (dtype '", h.descr, "') is not representable as ",
                                TypeName<T>()));
      }
    }
    done += n;
  }
  return h;
}

template <typename T>
Result<NpyHeader> AppendNpy(const std::string& path, std::vector<T>* out) {
  return AppendNpyRows(path, 0, -1, out);
}

template Result<NpyHeader> AppendNpyRows<float>(const std::string&, int64_t, int64_t, std::vector<float>*);
template Result<NpyHeader> AppendNpyRows<int64_t>(const std::string&, int64_t, int64_t, std::vector<int64_t>*);
template Result<NpyHeader> AppendNpyRows<uint8_t>(const std::string&, int64_t, int64_t, std::vector<uint8_t>*);
template Result<NpyHeader> AppendNpy<float>(const std::string&, std::vector<float>*);
template Result<NpyHeader> AppendNpy<double>(const std::string&, std::vector<double>*);
template Result<NpyHeader> AppendNpy<int64_t>(const std::string&, std::vector<int64_t>*);
template Result<NpyHeader> AppendNpy<uint8_t>(const std::string&, std::vector<uint8_t>*);

Result<NpyWriter> NpyWriter::Create(const std::string& path, const std::string& descr, int64_t rows, int64_t width) {
  const int64_t item = descr.size() == 3 ? descr[2] - '0' : 0;
  if (item != 1 && item != 2 && item != 4 && item != 8) return UsageError(StrCat(path, ": bad dtype '", descr, "'"));
  NpyWriter w;
  w.path_ = path;
  w.rows_ = rows;
  w.row_bytes_ = width * item;
  std::string dict = StrCat("{'descr': '", descr, "', 'fortran_order': False, 'shape': (", rows,
                            width == 1 ? "," : StrCat(", ", width), "), }");
  // The header (magic, version, length, dict) pads with spaces to a multiple of 64 and ends with a newline.
  const size_t total = kMagic.size() + 4 + dict.size() + 1;
  dict.append((64 - total % 64) % 64, ' ');
  dict.push_back('\n');
  std::string head(kMagic.begin(), kMagic.end());
  head += {'\x01', '\x00', static_cast<char>(dict.size() & 0xff), static_cast<char>(dict.size() >> 8)};
  head += dict;
  w.file_ = std::fopen(path.c_str(), "wb");
  if (!w.file_) return StorageError(StrCat(path, ": cannot create: ", std::strerror(errno)));
  if (std::fwrite(head.data(), 1, head.size(), w.file_) != head.size()) {
    return StorageError(StrCat(path, ": write failed: ", std::strerror(errno)));
  }
  return w;
}

NpyWriter::NpyWriter(NpyWriter&& o) noexcept
    : path_(std::move(o.path_)),
      file_(std::exchange(o.file_, nullptr)),
      rows_(o.rows_),
      written_(o.written_),
      row_bytes_(o.row_bytes_) {}

NpyWriter::~NpyWriter() {
  if (file_) std::fclose(file_);
}

Status NpyWriter::Append(const void* data, int64_t rows) {
  if (written_ + rows > rows_) return InternalError(StrCat(path_, ": more than the ", rows_, " rows of its header"));
  const auto bytes = static_cast<size_t>(rows * row_bytes_);
  if (bytes > 0 && std::fwrite(data, 1, bytes, file_) != bytes) {
    return StorageError(StrCat(path_, ": write failed: ", std::strerror(errno)));
  }
  written_ += rows;
  return Status::Ok();
}

Status NpyWriter::Close() {
  if (written_ != rows_) return InternalError(StrCat(path_, ": ", written_, " rows written, its header says ", rows_));
  std::FILE* f = std::exchange(file_, nullptr);
  if (std::fclose(f) != 0) return StorageError(StrCat(path_, ": write failed: ", std::strerror(errno)));
  return Status::Ok();
}

}  // namespace tessel::storage
