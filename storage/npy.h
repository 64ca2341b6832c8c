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

}  // namespace tessel::storage
