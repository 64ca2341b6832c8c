// gather.rows on CUDA, the zero-copy gather of PyTorch-Direct: the table stays in page-locked host memory
// and the kernel reads its rows across the bus through their device pointer (the caller passes the
// pointer cudaHostGetDevicePointer gives; <tessel/ops/gather.h>), so only the rows asked for move, with
// no staging copy. Device memory works the same way.
//
// One warp per row. Each lane moves a 16-byte word (uint4, the width of a float4) when the row, the
// table and Y allow it, else a 4-byte word. The warp's reads start at the 128-byte boundary at or before
// the row (the lanes before the row start idle), so every warp-wide load after the first covers whole
// aligned 128-byte segments: over PCIe a misaligned read costs one more transaction per load.
//
// Ids are checked on the device: a row with a bad id is skipped and the smallest such position is
// recorded; the kernel then waits for its stream and reports it as bad data. Arguments: gather_args.h.
#include <cstdint>
#include <vector>

#include "cuda_support.h"
#include "gather_args.h"
#include "index_checks.h"

namespace tessel::kernels::gather {
namespace {

constexpr int kWarp = 32;
constexpr int kWarpsPerBlock = kThreads / kWarp;
constexpr uintptr_t kSegment = 128;
// No bad id (atomicMin keeps the smallest position; the flag starts as all ones).
constexpr unsigned long long kNoBadRow = ~0ull;

template <typename Word>
__global__ void GatherRowsKernel(const char* __restrict__ table, int64_t n, int64_t row_bytes,
                                 const int64_t* __restrict__ ids, int64_t m, char* __restrict__ out,
                                 unsigned long long* first_bad_row) {
  constexpr int64_t kWordBytes = sizeof(Word);
  const int lane = static_cast<int>(threadIdx.x % kWarp);
  const int64_t warps = int64_t(gridDim.x) * kWarpsPerBlock;
  for (int64_t row = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp; row < m; row += warps) {
    const int64_t id = ids[row];  // the same address in every lane: one broadcast load
    if (id < 0 || id >= n) {
      if (lane == 0) atomicMin(first_bad_row, static_cast<unsigned long long>(row));
      continue;
    }
    const char* src = table + id * row_bytes;
    char* dst = out + row * row_bytes;
    // Bytes between the segment boundary and the row start: a multiple of kWordBytes, since the table
    // and the rows are aligned to the word.
    const int64_t head = static_cast<int64_t>(reinterpret_cast<uintptr_t>(src) % kSegment);
#pragma unroll 4
    for (int64_t offset = lane * kWordBytes - head; offset < row_bytes; offset += kWarp * kWordBytes) {
      if (offset >= 0) *reinterpret_cast<Word*>(dst + offset) = *reinterpret_cast<const Word*>(src + offset);
    }
  }
}

bool Aligned(const void* p, uintptr_t alignment) { return reinterpret_cast<uintptr_t>(p) % alignment == 0; }

unsigned GatherBlocks(int64_t m) {
  const int64_t blocks = (m + kWarpsPerBlock - 1) / kWarpsPerBlock;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > 65535 * 16 ? 65535 * 16 : blocks));
}

struct GatherRowsCuda {
  template <typename T>
  static void Run(const KernelArgs& args, const GatherRowsArgs<T>& a) {
    const int64_t n = a.n, m = a.m, row_bytes = a.RowBytes();
    const int64_t* ids = a.ids;
    if (m == 0) return;
    cudaStream_t stream = StreamOf(args);
    Workspace<unsigned long long> first_bad_row(args, 1);
    CheckCuda(cudaMemsetAsync(first_bad_row.get(), 0xff, sizeof(unsigned long long), stream), "clear the bad-id flag");
    const auto* src = reinterpret_cast<const char*>(a.table);
    auto* dst = reinterpret_cast<char*>(a.y);
    if (row_bytes % 16 == 0 && Aligned(src, 16) && Aligned(dst, 16)) {
      GatherRowsKernel<uint4>
          <<<GatherBlocks(m), kThreads, 0, stream>>>(src, n, row_bytes, ids, m, dst, first_bad_row.get());
    } else {
      GatherRowsKernel<uint32_t>
          <<<GatherBlocks(m), kThreads, 0, stream>>>(src, n, row_bytes, ids, m, dst, first_bad_row.get());
    }
    CheckLaunch("GatherRowsKernel");
    const int64_t bad_row = CopyToHost(reinterpret_cast<const int64_t*>(first_bad_row.get()), 1, stream)[0];
    if (static_cast<unsigned long long>(bad_row) != kNoBadRow) {
      FailIndexOutOfRange("ids", bad_row, CopyToHost(ids + bad_row, 1, stream)[0], n);
    }
  }
};

}  // namespace

TESSEL_DEFINE_KERNEL(GatherRowsCuda, GatherRowsArgs, TESSEL_DEVICE_CUDA)

}  // namespace tessel::kernels::gather
