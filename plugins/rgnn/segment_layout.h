// The segment layout of the fused kernels (<tessel/ops/rgnn.h>), read from a call's tensors and checked:
// the structure (offsets tile their ranges, runs and rows stay inside their blocks) and every index
// (sources, destinations, relations, segments in range). A bad layout is a TESSEL_STATUS_BAD_DATA error
// naming the array, never an out-of-bounds access. CUDA kernels read the same struct unchecked.
// Thread safety: plain views into the call's tensors.
#pragma once

#include <cstdint>

#include "kernel_support.h"

namespace tessel::kernels::rgnn {

// Destination-major: blocks of output rows -> runs of one relation -> segments (r, i) -> edges.
struct DstLayout {
  int64_t num_blocks = 0, num_runs = 0, num_segs = 0, num_edges = 0;
  const int64_t* blk_row = nullptr;   // [B+1]
  const int64_t* blk_run = nullptr;   // [B+1]
  const int32_t* run_rel = nullptr;   // [Q]
  const int64_t* run_seg = nullptr;   // [Q+1]
  const int32_t* seg_dst = nullptr;   // [S]
  const int64_t* seg_edge = nullptr;  // [S+1]
  const int32_t* edge_src = nullptr;  // [E]
};

// Source-major: blocks of input rows -> runs of one relation -> pairs (r, j) -> edges.
struct SrcLayout {
  int64_t num_blocks = 0, num_runs = 0, num_pairs = 0, num_edges = 0;
  const int64_t* blk_row = nullptr;    // [C+1]
  const int64_t* blk_run = nullptr;    // [C+1]
  const int32_t* run_rel = nullptr;    // [P]
  const int64_t* run_pair = nullptr;   // [P+1]
  const int32_t* pair_src = nullptr;   // [U]
  const int64_t* pair_edge = nullptr;  // [U+1]
  const int32_t* edge_seg = nullptr;   // [E]
};

// How much each reader checks follows args.data_check(): kFull reads every index once (CPU kernels);
// kShapesOnly only binds the sizes (CUDA kernels, which trust the host's layout).

// The 7 DST tensors starting at input `first`. `n` (output rows), `m` (input rows) and `r` (relations)
// are the call's sizes, already bound by its other tensors.
DstLayout ReadDstLayout(const KernelArgs& args, int first, int64_t n, int64_t m, int64_t r);
// The 7 SRC tensors starting at input `first`; `num_segs` is the DST layout's S (edge_seg's bound).
SrcLayout ReadSrcLayout(const KernelArgs& args, int first, int64_t m, int64_t r, int64_t num_segs);

// The pair of each dst-major edge (RGAT, HGT): `e` entries, each < num_pairs.
const int32_t* ReadEdgePair(const KernelArgs& args, int index, int64_t e, int64_t num_pairs);

}  // namespace tessel::kernels::rgnn
