// Reading NumPy .npy files (numpy.lib.format, versions 1.0, 2.0 and 3.0): the arrays of DGL's chunked
// graph format (storage/chunked_import.h). An array is read into a caller's vector, converted element by
// element to the vector's type as it streams from the file, so a chunk is never held twice.
//
// Accepted: C order, little-endian or single-byte elements of a bool ('|b1'), signed or unsigned integer
// (1, 2, 4, 8 bytes) or floating-point (4, 8 bytes) dtype, any rank (rows = the first dimension, the
// rest is one row). Refused, as kBadData naming the file: a bad magic or header, a Fortran-order,
// big-endian, structured or object array, a file shorter than its header says (truncated), an integer
// read into an integer type that cannot hold it, and a floating-point value read into an integer type.
// A read error from the OS is kStorage.
//
// Thread safety: plain functions. Ownership: the caller's vector.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "core/status.h"

namespace tessel::storage {

struct NpyHeader {
  char kind = 0;               // 'b' bool, 'i' signed, 'u' unsigned, 'f' floating point
  int32_t item_bytes = 0;      // 1, 2, 4 or 8
  std::vector<int64_t> shape;  // () for a scalar
  int64_t data_offset = 0;     // where the elements start
  std::string descr;           // as written, e.g. "<f4"

  int64_t rows() const { return shape.empty() ? 1 : shape[0]; }
  int64_t row_width() const;  // the product of shape[1:], 1 for a rank-0 or rank-1 array
};

// The header of `path`, checked against its size (a truncated file is refused here).
Result<NpyHeader> ReadNpyHeader(const std::string& path);

// Appends every element of `path`, converted to T, to *out, and returns the header. T: float, double,
// int64_t or uint8_t (a mask: every value must be 0 or 1).
template <typename T>
Result<NpyHeader> AppendNpy(const std::string& path, std::vector<T>* out);

// The same for rows [first_row, first_row + rows) alone (rows = -1: through the last), reading only
// their bytes: a rank's share of a chunk. Rows outside the array are kUsage.
template <typename T>
Result<NpyHeader> AppendNpyRows(const std::string& path, int64_t first_row, int64_t rows, std::vector<T>* out);

// Writes a .npy file (format 1.0, C order) of `rows` rows of `width` elements of `descr` ("<f4", "<i8",
// "|b1"), streamed: Append the rows in order, then Close, which checks that exactly `rows` rows came.
// Failure: kStorage naming the file. The caller removes a half-written file (a whole output is written
// into a temporary directory).
class NpyWriter {
 public:
  static Result<NpyWriter> Create(const std::string& path, const std::string& descr, int64_t rows, int64_t width);
  NpyWriter(NpyWriter&& o) noexcept;
  NpyWriter& operator=(NpyWriter&&) = delete;
  ~NpyWriter();
  Status Append(const void* data, int64_t rows);
  Status Close();

 private:
  NpyWriter() = default;
  std::string path_;
  std::FILE* file_ = nullptr;
  int64_t rows_ = 0, written_ = 0, row_bytes_ = 0;
};

}  // namespace tessel::storage
