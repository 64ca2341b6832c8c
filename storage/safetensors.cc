#include "storage/safetensors.h"

#include <sys/mman.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include "core/json.h"
#include "core/logging.h"
#include "storage/binary_file.h"
#include "storage/feature_check.h"

namespace tessel::storage {
namespace {

static_assert(std::endian::native == std::endian::little, "safetensors bytes are read in place");

constexpr int64_t kMaxHeaderBytes = 100'000'000;  // the format's own limit

int64_t DtypeBytes(std::string_view dtype) {
  if (dtype == "F32") return 4;
  if (dtype == "F16" || dtype == "BF16") return 2;
  return 0;  // a dtype Tessel does not read (F64, I64, BOOL, ...)
}

float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  if (exp == 0) {  // zero or subnormal: mant x 2^-24
    const float v = std::ldexp(static_cast<float>(mant), -24);
    return sign != 0 ? -v : v;
  }
  const uint32_t bits = exp == 0x1f ? sign | 0x7f800000u | (mant << 13) : sign | ((exp + 112) << 23) | (mant << 13);
  return std::bit_cast<float>(bits);
}

Status Bad(const std::string& path, std::string_view what) { return BadDataError(StrCat(path, ": ", what)); }

// One entry of the header, checked against the data's length.
Result<SafetensorsEntry> EntryOf(const std::string& path, const std::string& name, const Json& v, int64_t data) {
  const std::string where = StrCat("tensor '", name, "'");
  if (!v.is_object()) return Bad(path, StrCat(where, ": not a JSON object"));
  SafetensorsEntry e;
  e.name = name;
  const auto dtype = v.find("dtype"), shape = v.find("shape"), offsets = v.find("data_offsets");
  if (dtype == v.end() || !dtype->is_string()) return Bad(path, StrCat(where, ": no \"dtype\" string"));
  e.dtype = dtype->get<std::string>();
  if (shape == v.end() || !shape->is_array()) return Bad(path, StrCat(where, ": no \"shape\" array"));
  for (const Json& d : *shape) {
    if (!d.is_number_unsigned()) return Bad(path, StrCat(where, ": \"shape\" holds ", d.dump(), ", not a size"));
    e.shape.push_back(d.get<int64_t>());
  }
  if (offsets == v.end() || !offsets->is_array() || offsets->size() != 2 || !(*offsets)[0].is_number_unsigned() ||
      !(*offsets)[1].is_number_unsigned()) {
    return Bad(path, StrCat(where, ": \"data_offsets\" is not [begin, end]"));
  }
  e.begin = (*offsets)[0].get<int64_t>();
  e.end = (*offsets)[1].get<int64_t>();
  if (e.begin < 0 || e.end < e.begin || e.end > data) {
    return Bad(path, StrCat(where, ": data_offsets [", e.begin, ", ", e.end, "] are not within the ", data,
                            " bytes of data (truncated?)"));
  }
  const int64_t bytes = DtypeBytes(e.dtype);
  if (bytes > 0) {
    int64_t n = 1;
    for (const int64_t d : e.shape) {
      if (d != 0 && n > std::numeric_limits<int64_t>::max() / 8 / d)
        return Bad(path, StrCat(where, ": shape overflows"));
      n *= d;
    }
    if (n * bytes != e.end - e.begin) {
      return Bad(path, StrCat(where, ": ", e.end - e.begin, " bytes for ", n, " values of ", e.dtype, " (", n * bytes,
                              " bytes)"));
    }
  }
  return e;
}

}  // namespace

int64_t SafetensorsEntry::numel() const {
  int64_t n = 1;
  for (const int64_t d : shape) n *= d;
  return n;
}

Result<SafetensorsFile> SafetensorsFile::Open(const std::string& path) {
  TESSEL_ASSIGN_OR_RETURN(OpenFile file, OpenForReading(path));
  if (file.size < 8)
    return Bad(path, StrCat(file.size, " bytes: too short for a safetensors file (8-byte header length)"));
  uint64_t n = 0;
  TESSEL_RETURN_IF_ERROR(ReadAt(file, &n, 8, 0, path));
  if (n > static_cast<uint64_t>(kMaxHeaderBytes) || static_cast<int64_t>(n) > file.size - 8) {
    return Bad(path, StrCat("the header length is ", n, " bytes, but the file has ", file.size - 8,
                            " after it (truncated, or not a safetensors file)"));
  }
  SafetensorsFile f;
  f.path_ = path;
  f.size_ = file.size;
  f.data_ = 8 + static_cast<int64_t>(n);
  void* map = ::mmap(nullptr, static_cast<size_t>(file.size), PROT_READ, MAP_PRIVATE, file.fd->get(), 0);
  if (map == MAP_FAILED) return StorageError(StrCat(path, ": cannot map: ", std::strerror(errno)));
  f.map_ = static_cast<const unsigned char*>(map);
  const std::string_view text(reinterpret_cast<const char*>(f.map_) + 8, n);
  TESSEL_ASSIGN_OR_RETURN(const Json doc, ParseJson(text, StrCat(path, ": header")));
  if (!doc.is_object()) return Bad(path, "the header is not a JSON object");
  const int64_t data = f.size_ - f.data_;
  for (const auto& [name, value] : doc.items()) {
    if (name == "__metadata__") {
      if (!value.is_object()) return Bad(path, "__metadata__ is not an object of strings");
      for (const auto& [k, v] : value.items()) {
        if (!v.is_string()) return Bad(path, StrCat("__metadata__.", k, " is not a string"));
        f.metadata_[k] = v.get<std::string>();
      }
      continue;
    }
    TESSEL_ASSIGN_OR_RETURN(SafetensorsEntry e, EntryOf(path, name, value, data));
    f.entries_.push_back(std::move(e));
  }
  // The tensors tile the data: no overlap, no gap, nothing after them (as the format's own reader checks).
  std::vector<const SafetensorsEntry*> by_offset;
  for (const SafetensorsEntry& e : f.entries_) by_offset.push_back(&e);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const SafetensorsEntry* a, const SafetensorsEntry* b) { return a->begin < b->begin; });
  int64_t at = 0;
  for (const SafetensorsEntry* e : by_offset) {
    if (e->begin != at) {
      return Bad(path, StrCat("tensor '", e->name, "' begins at data byte ", e->begin, ", expected ", at,
                              e->begin < at ? " (it overlaps the tensor before it)" : " (a gap before it)"));
    }
    at = e->end;
  }
  if (at != data) return Bad(path, StrCat("the tensors end at data byte ", at, " but the file holds ", data));
  return f;
}

SafetensorsFile::SafetensorsFile(SafetensorsFile&& o) noexcept
    : path_(std::move(o.path_)),
      map_(o.map_),
      size_(o.size_),
      data_(o.data_),
      entries_(std::move(o.entries_)),
      metadata_(std::move(o.metadata_)) {
  o.map_ = nullptr;
}

SafetensorsFile::~SafetensorsFile() {
  if (map_ != nullptr) ::munmap(const_cast<unsigned char*>(map_), static_cast<size_t>(size_));
}

const SafetensorsEntry* SafetensorsFile::Find(std::string_view name) const {
  for (const SafetensorsEntry& e : entries_) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

Status SafetensorsFile::ReadFloats(const SafetensorsEntry& e, float* out) const {
  const unsigned char* src = map_ + data_ + e.begin;
  const int64_t n = e.numel();
  if (e.dtype == "F32") {
    std::memcpy(out, src, static_cast<size_t>(n) * sizeof(float));
  } else if (e.dtype == "F16" || e.dtype == "BF16") {
    const bool bf16 = e.dtype == "BF16";
    for (int64_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, src + 2 * i, 2);
      out[i] = bf16 ? std::bit_cast<float>(static_cast<uint32_t>(h) << 16) : HalfToFloat(h);
    }
  } else {
    return Bad(path_, StrCat("tensor '", e.name, "' is ", e.dtype, "; Tessel reads F32, F16 and BF16"));
  }
  const int64_t bad = FirstNonFinite(out, n);
  if (bad >= 0) {
    return Bad(path_, StrCat("tensor '", e.name, "'[", bad, "] is ", std::isnan(out[bad]) ? "NaN" : "infinite",
                             "; parameters must be finite"));
  }
  return Status::Ok();
}

Status WriteSafetensors(const std::string& path, const std::vector<SafetensorsTensor>& tensors,
                        const std::map<std::string, std::string>& metadata) {
  Json header = Json::object();
  if (!metadata.empty()) {
    Json m = Json::object();
    for (const auto& [k, v] : metadata) m[k] = v;
    header["__metadata__"] = m;
  }
  int64_t at = 0;
  for (const SafetensorsTensor& t : tensors) {
    int64_t n = 1;
    for (const int64_t d : t.shape) n *= d;
    header[t.name] = {{"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {at, at + 4 * n}}};
    at += 4 * n;
  }
  std::string text = FormatJson(header, JsonLayout::kCompact);
  text.append((8 - text.size() % 8) % 8, ' ');  // the data starts 8-byte aligned, as the format's writer pads it
  const uint64_t n = text.size();
  AtomicFileWriter out(path);
  TESSEL_RETURN_IF_ERROR(out.Open());
  TESSEL_RETURN_IF_ERROR(out.Write(&n, 8));
  TESSEL_RETURN_IF_ERROR(out.Write(text.data(), static_cast<int64_t>(text.size())));
  for (const SafetensorsTensor& t : tensors) {
    int64_t count = 1;
    for (const int64_t d : t.shape) count *= d;
    TESSEL_RETURN_IF_ERROR(out.Write(t.data, count * 4));
  }
  return out.Commit();
}

}  // namespace tessel::storage
