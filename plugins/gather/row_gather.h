// The CPU row gather behind gather.rows: out[i] = table[ids[i]] for a range of i, rows of any byte
// width, read in place from wherever the table lives (a mapped file, pinned or pageable memory) and
// written straight into the output, with no staging buffer.
//
// A random row of a table far larger than the caches is a DRAM miss, and on a large table a TLB miss
// too, so the loop prefetches whole rows a few kilobytes ahead. Large outputs whose rows are whole
// cache lines are written with non-temporal stores: the destination is then never read for ownership,
// which saves a third of the memory traffic of a copy. Those copies use AVX-512 or AVX2 when the CPU
// has them (chosen at run time, so the plugin runs on any x86-64) and SSE2 otherwise; other copies are
// memcpy.
// Thread safety: pure functions over caller-owned memory; `out` must not overlap the table.
#pragma once

#include <cstdint>

namespace tessel::kernels::gather {

// How the destination is written.
enum class Stores {
  kRegular,    // ordinary stores (memcpy): the output stays in cache for whoever reads it next
  kStreaming,  // non-temporal stores: whole aligned cache lines, straight to memory
};

// Outputs at least this large are streamed: several times a core's L2, so a cached copy would be
// evicted before anyone read it.
inline constexpr int64_t kStreamingMinBytes = int64_t{4} << 20;

// kStreaming when every output row is whole 64-byte lines (row_bytes a multiple of 64 and `out` 64-byte
// aligned) and the output has at least kStreamingMinBytes; else kRegular.
Stores ChooseStores(const void* out, int64_t row_bytes, int64_t rows);

// Rows prefetched ahead of the copy: about 4 KiB of rows, at least 4 and at most 32.
int64_t PrefetchDistance(int64_t row_bytes);

// True when every ids[i], i in [begin, end), is in [0, n).
bool IdsInRange(const int64_t* ids, int64_t begin, int64_t end, int64_t n);

// Copies table row ids[i] (row_bytes bytes each) to out + i * row_bytes for i in [begin, end). The ids
// must be in range (IdsInRange). kStreaming requires what ChooseStores checks.
void GatherRows(const char* table, int64_t row_bytes, const int64_t* ids, int64_t begin, int64_t end, char* out,
                Stores stores);

// The instruction set the streaming copy uses on this CPU: "avx512", "avx2", "sse2" or "none" (not
// x86-64: streaming falls back to memcpy).
const char* StreamingIsa();

}  // namespace tessel::kernels::gather
