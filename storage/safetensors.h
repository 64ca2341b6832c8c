// safetensors, Hugging Face's tensor file (https://huggingface.co/docs/safetensors): an 8-byte little-endian
// header length N, N bytes of JSON, then the tensors' bytes. The JSON is an object of
//   "NAME": {"dtype": "F32" | "F16" | "BF16" | ..., "shape": [d0, d1, ...], "data_offsets": [begin, end]}
// with offsets counted from the end of the header, and an optional "__metadata__" object of strings
// ({"format": "pt"} as transformers writes it). Tensors are row-major and little-endian.
//
// Reading maps the file and checks the header before any tensor is touched: its length within the file and
// below 100 MB (the format's own limit), valid JSON, every entry's dtype, shape and offsets, each tensor's
// bytes its shape times its dtype's size, inside the data, no two overlapping. ReadFloats converts F32,
// F16 and BF16 to float32 and refuses a NaN or an infinity.
// Writing (float32 only) goes through a temporary file, flushed and renamed into place.
// Failure: kBadData naming the file (and the tensor or the header's byte); kStorage for I/O.
// Thread safety: a SafetensorsFile is read-only once open; any thread may read from it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace tessel::storage {

struct SafetensorsEntry {
  std::string name, dtype;
  std::vector<int64_t> shape;
  int64_t begin = 0, end = 0;  // byte offsets into the data
  int64_t numel() const;
};

class SafetensorsFile {
 public:
  static Result<SafetensorsFile> Open(const std::string& path);
  SafetensorsFile(SafetensorsFile&& other) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&&) = delete;
  SafetensorsFile(const SafetensorsFile&) = delete;
  ~SafetensorsFile();

  const std::string& path() const { return path_; }
  const std::vector<SafetensorsEntry>& entries() const { return entries_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const SafetensorsEntry* Find(std::string_view name) const;  // null when absent
  // The tensor's numel() values as float32 into `out`.
  Status ReadFloats(const SafetensorsEntry& entry, float* out) const;

 private:
  SafetensorsFile() = default;
  std::string path_;
  const unsigned char* map_ = nullptr;
  int64_t size_ = 0, data_ = 0;  // the mapping's length; where the data begins
  std::vector<SafetensorsEntry> entries_;
  std::map<std::string, std::string> metadata_;
};

// A float32 tensor to write: `data` holds the product of `shape` values.
struct SafetensorsTensor {
  std::string name;
  std::vector<int64_t> shape;
  const float* data = nullptr;
};
Status WriteSafetensors(const std::string& path, const std::vector<SafetensorsTensor>& tensors,
                        const std::map<std::string, std::string>& metadata);

}  // namespace tessel::storage
