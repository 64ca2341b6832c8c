#include "row_gather.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define TESSEL_GATHER_X86 1
#else
#define TESSEL_GATHER_X86 0
#endif

namespace tessel::kernels::gather {
namespace {

constexpr int64_t kLine = 64;
constexpr int64_t kPrefetchBytes = 4096;

// Every line of a row (prefetcht1: measured faster on this loop than prefetcht0 and prefetchnta). The
// last byte too, for a row that is not line-aligned and ends in one more line.
inline __attribute__((always_inline)) void PrefetchRow(const char* row, int64_t bytes) {
  for (int64_t b = 0; b < bytes; b += kLine) __builtin_prefetch(row + b, 0, 2);
  __builtin_prefetch(row + bytes - 1, 0, 2);
}

// The loop every variant shares: rows [begin, end), whole rows prefetched `ahead` rows before they are
// copied (the first `ahead` before the loop starts). `Copy::Row(dst, src, bytes)` moves one row.
template <typename Copy>
inline __attribute__((always_inline)) void GatherLoop(const char* table, int64_t row_bytes, const int64_t* ids,
                                                      int64_t begin, int64_t end, char* out) {
  const int64_t ahead = PrefetchDistance(row_bytes);
  for (int64_t i = begin; i < std::min(end, begin + ahead); ++i) PrefetchRow(table + ids[i] * row_bytes, row_bytes);
  for (int64_t i = begin; i < end; ++i) {
    if (i + ahead < end) PrefetchRow(table + ids[i + ahead] * row_bytes, row_bytes);
    Copy::Row(out + i * row_bytes, table + ids[i] * row_bytes, row_bytes);
  }
}

struct MemcpyRow {
  static void Row(char* dst, const char* src, int64_t bytes) { std::memcpy(dst, src, static_cast<size_t>(bytes)); }
};

#if TESSEL_GATHER_X86
// Streaming row copies: `bytes` a multiple of 64 and `dst` 64-byte aligned; the source may be anywhere.
// Each is inlined only into the variant of GatherLoop compiled for its instruction set (below).
struct StreamRowAvx512 {
  __attribute__((target("avx512f"))) static void Row(char* dst, const char* src, int64_t bytes) {
    for (int64_t b = 0; b < bytes; b += 64) {
      _mm512_stream_si512(reinterpret_cast<__m512i*>(dst + b), _mm512_loadu_si512(src + b));
    }
  }
};
struct StreamRowAvx2 {
  __attribute__((target("avx2"))) static void Row(char* dst, const char* src, int64_t bytes) {
    for (int64_t b = 0; b < bytes; b += 32) {
      _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + b),
                          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + b)));
    }
  }
};
struct StreamRowSse2 {
  static void Row(char* dst, const char* src, int64_t bytes) {
    for (int64_t b = 0; b < bytes; b += 16) {
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst + b), _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + b)));
    }
  }
};

// flatten: the loop and the row copy are compiled as one function for the instruction set, so no call
// per row remains. The fence orders the weakly-ordered streaming stores before the caller reports the
// chunk done.
__attribute__((target("avx512f"), flatten)) void StreamAvx512(const char* table, int64_t row_bytes, const int64_t* ids,
                                                              int64_t begin, int64_t end, char* out) {
  GatherLoop<StreamRowAvx512>(table, row_bytes, ids, begin, end, out);
  _mm_sfence();
}
__attribute__((target("avx2"), flatten)) void StreamAvx2(const char* table, int64_t row_bytes, const int64_t* ids,
                                                         int64_t begin, int64_t end, char* out) {
  GatherLoop<StreamRowAvx2>(table, row_bytes, ids, begin, end, out);
  _mm_sfence();
}
__attribute__((flatten)) void StreamSse2(const char* table, int64_t row_bytes, const int64_t* ids, int64_t begin,
                                         int64_t end, char* out) {
  GatherLoop<StreamRowSse2>(table, row_bytes, ids, begin, end, out);
  _mm_sfence();
}
#endif

using GatherFn = void (*)(const char*, int64_t, const int64_t*, int64_t, int64_t, char*);

struct StreamingVariant {
  GatherFn fn;
  const char* isa;
};

StreamingVariant PickStreaming() {
#if TESSEL_GATHER_X86
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return {&StreamAvx512, "avx512"};
  if (__builtin_cpu_supports("avx2")) return {&StreamAvx2, "avx2"};
  return {&StreamSse2, "sse2"};
#else
  return {nullptr, "none"};
#endif
}

// Chosen once per process from the CPU's features (immutable afterwards).
const StreamingVariant& Streaming() {
  static const StreamingVariant variant = PickStreaming();
  return variant;
}

}  // namespace

Stores ChooseStores(const void* out, int64_t row_bytes, int64_t rows) {
  const bool whole_lines = row_bytes > 0 && row_bytes % kLine == 0 && reinterpret_cast<uintptr_t>(out) % kLine == 0;
  const bool large = rows >= kStreamingMinBytes / std::max<int64_t>(1, row_bytes);
  return whole_lines && large && Streaming().fn != nullptr ? Stores::kStreaming : Stores::kRegular;
}

int64_t PrefetchDistance(int64_t row_bytes) {
  return std::clamp<int64_t>(kPrefetchBytes / std::max<int64_t>(1, row_bytes), 4, 32);
}

bool IdsInRange(const int64_t* ids, int64_t begin, int64_t end, int64_t n) {
  // One unsigned comparison per id (a negative id wraps to a huge value), branch-free so it vectorises.
  uint64_t bad = 0;
  for (int64_t i = begin; i < end; ++i)
    bad |= static_cast<uint64_t>(ids[i] >= n) | (static_cast<uint64_t>(ids[i]) >> 63);
  return bad == 0;
}

void GatherRows(const char* table, int64_t row_bytes, const int64_t* ids, int64_t begin, int64_t end, char* out,
                Stores stores) {
  if (row_bytes <= 0 || begin >= end) return;
  if (stores == Stores::kStreaming && Streaming().fn != nullptr) {
    Streaming().fn(table, row_bytes, ids, begin, end, out);
    return;
  }
  GatherLoop<MemcpyRow>(table, row_bytes, ids, begin, end, out);
}

const char* StreamingIsa() { return Streaming().isa; }

}  // namespace tessel::kernels::gather
