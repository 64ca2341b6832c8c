#include "index_checks.h"

#include <algorithm>
#include <string>

#include "kernel_support.h"

namespace tessel::kernels {

void CheckOffsets(const int64_t* ptr, int64_t n, int64_t total, const char* name) {
  if (ptr[0] != 0) Fail(TESSEL_STATUS_BAD_DATA, std::string(name) + "[0] must be 0, is " + std::to_string(ptr[0]));
  for (int64_t i = 0; i < n; ++i) {
    if (ptr[i + 1] < ptr[i]) {
      Fail(TESSEL_STATUS_BAD_DATA, std::string(name) + " decreases at " + std::to_string(i + 1));
    }
  }
  if (ptr[n] != total) {
    Fail(TESSEL_STATUS_BAD_DATA, std::string(name) + "[" + std::to_string(n) + "] must be " + std::to_string(total) +
                                     ", is " + std::to_string(ptr[n]));
  }
}

void CheckIndices(const int64_t* idx, int64_t n, int64_t bound, const char* name) {
  for (int64_t i = 0; i < n; ++i) {
    if (idx[i] < 0 || idx[i] >= bound) FailIndexOutOfRange(name, i, idx[i], bound);
  }
}

void CheckIndices(const int32_t* idx, int64_t n, int64_t bound, const char* name) {
  for (int64_t i = 0; i < n; ++i) {
    if (idx[i] < 0 || idx[i] >= bound) FailIndexOutOfRange(name, i, idx[i], bound);
  }
}

void FailIndexOutOfRange(const char* name, int64_t i, int64_t value, int64_t bound) {
  Fail(TESSEL_STATUS_BAD_DATA, std::string(name) + "[" + std::to_string(i) + "] = " + std::to_string(value) +
                                   " is out of range [0, " + std::to_string(bound) + ")");
}

std::vector<RowBlock> RelationBlocks(const int64_t* rel_ptr, int64_t num_relations, int64_t max_rows) {
  std::vector<RowBlock> blocks;
  max_rows = std::max<int64_t>(1, max_rows);
  for (int64_t r = 0; r < num_relations; ++r) {
    for (int64_t begin = rel_ptr[r]; begin < rel_ptr[r + 1]; begin += max_rows) {
      blocks.push_back({r, begin, std::min(rel_ptr[r + 1], begin + max_rows)});
    }
  }
  return blocks;
}

int64_t GemmBlockRows(int64_t k, int64_t d) {
  // OpenBLAS stays single-threaded below m*n*k = 262144; aim just under it.
  constexpr int64_t kSingleThreadFlops = 262144;
  return std::clamp<int64_t>(kSingleThreadFlops / std::max<int64_t>(1, k * d), 32, 4096);
}

}  // namespace tessel::kernels
