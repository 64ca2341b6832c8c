// Checks of the worker graph arrays (the "separate COO" of rgnn_ops.h) and the row blocks the typed
// linear kernels work on. Every check throws KernelError(TESSEL_STATUS_BAD_DATA) naming the array, so
// a corrupt partition is an error message, not an out-of-bounds write.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <vector>

namespace tessel::kernels {

// ptr[0] == 0, nondecreasing, ptr[n] == total.
void CheckOffsets(const int64_t* ptr, int64_t n, int64_t total, const char* name);

// Every idx[i] in [0, bound).
void CheckIndices(const int64_t* idx, int64_t n, int64_t bound, const char* name);
void CheckIndices(const int32_t* idx, int64_t n, int64_t bound, const char* name);

// CheckIndices' error for name[i] = value outside [0, bound), for a kernel that finds it itself.
[[noreturn]] void FailIndexOutOfRange(const char* name, int64_t i, int64_t value, int64_t bound);

// A run of compact rows [begin, end) that all belong to one relation.
struct RowBlock {
  int64_t relation;
  int64_t begin;
  int64_t end;
};

// Splits each relation's rows [rel_ptr[r], rel_ptr[r+1]) into blocks of at most max_rows rows.
// Empty relations contribute no block.
std::vector<RowBlock> RelationBlocks(const int64_t* rel_ptr, int64_t num_relations, int64_t max_rows);

// Rows per GEMM block for a [rows x k] @ [k x d] product: small enough that OpenBLAS runs the block on
// the calling thread (the host's pool supplies the parallelism), large enough to stay efficient.
int64_t GemmBlockRows(int64_t k, int64_t d);

}  // namespace tessel::kernels
