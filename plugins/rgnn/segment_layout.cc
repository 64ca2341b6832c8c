#include "segment_layout.h"

#include <string>

namespace tessel::kernels::rgnn {
namespace {

[[noreturn]] void Bad(const std::string& message) { Fail(TESSEL_STATUS_BAD_DATA, "segment layout: " + message); }

// ptr[0] == 0, nondecreasing, ptr[n] == total (any total when it is kUnbound).
void CheckOffsets(const int64_t* ptr, int64_t n, int64_t total, const char* name) {
  if (ptr[0] != 0) Bad(std::string(name) + "[0] must be 0");
  for (int64_t i = 0; i < n; ++i) {
    if (ptr[i + 1] < ptr[i]) Bad(std::string(name) + " decreases at " + std::to_string(i + 1));
  }
  if (total != kUnbound && ptr[n] != total) {
    Bad(std::string(name) + "[" + std::to_string(n) + "] must be " + std::to_string(total) + ", is " +
        std::to_string(ptr[n]));
  }
}

// Blocks -> runs -> items: runs have increasing relations < r inside a block, items nonempty, and the
// rows of a run's items inside the block, nondecreasing (r == kUnbound: any relation >= 0). Shared by
// both sides.
void CheckHierarchy(int64_t blocks, const int64_t* blk_row, const int64_t* blk_run, const int32_t* run_rel,
                    const int64_t* run_item, const int32_t* item_row, const int64_t* item_edge, int64_t r,
                    const char* side) {
  for (int64_t b = 0; b < blocks; ++b) {
    int32_t last_rel = -1;
    for (int64_t q = blk_run[b]; q < blk_run[b + 1]; ++q) {
      const int32_t rel = run_rel[q];
      if (rel < 0 || (r != kUnbound && rel >= r))
        Bad(std::string(side) + " run " + std::to_string(q) + " has relation " + std::to_string(rel));
      if (rel <= last_rel)
        Bad(std::string(side) + " block " + std::to_string(b) + " repeats or misorders relation " +
            std::to_string(rel));
      last_rel = rel;
      int64_t last_row = -1;
      for (int64_t s = run_item[q]; s < run_item[q + 1]; ++s) {
        const int64_t row = item_row[s];
        if (row < blk_row[b] || row >= blk_row[b + 1]) {
          Bad(std::string(side) + " item " + std::to_string(s) + " has row " + std::to_string(row) +
              " outside its block [" + std::to_string(blk_row[b]) + ", " + std::to_string(blk_row[b + 1]) + ")");
        }
        if (row < last_row) Bad(std::string(side) + " run " + std::to_string(q) + " is not sorted by row");
        last_row = row;
        if (item_edge[s + 1] <= item_edge[s]) Bad(std::string(side) + " item " + std::to_string(s) + " has no edge");
      }
    }
  }
}

template <typename I>
void CheckIndices(const I* idx, int64_t n, int64_t bound, const char* name) {
  for (int64_t i = 0; i < n; ++i) {
    if (idx[i] < 0 || idx[i] >= bound) {
      Bad(std::string(name) + "[" + std::to_string(i) + "] = " + std::to_string(idx[i]) + " is out of range [0, " +
          std::to_string(bound) + ")");
    }
  }
}

}  // namespace

DstLayout ReadDstLayout(const KernelArgs& args, int first, int64_t n, int64_t m, int64_t r) {
  DstLayout l;
  int64_t b1 = kUnbound, q = kUnbound, q1 = kUnbound, s = kUnbound, s1 = kUnbound, e = kUnbound;
  l.blk_row = args.In<int64_t>(first, "dblk_row", {&b1});
  l.blk_run = args.In<int64_t>(first + 1, "dblk_run", {&b1});
  l.run_rel = args.In<int32_t>(first + 2, "drun_rel", {&q});
  q1 = q + 1;
  l.run_seg = args.In<int64_t>(first + 3, "drun_seg", {&q1});
  l.seg_dst = args.In<int32_t>(first + 4, "seg_dst", {&s});
  s1 = s + 1;
  l.seg_edge = args.In<int64_t>(first + 5, "seg_edge", {&s1});
  l.edge_src = args.In<int32_t>(first + 6, "dedge_src", {&e});
  l.num_blocks = b1 - 1;
  l.num_runs = q;
  l.num_segs = s;
  l.num_edges = e;
  if (l.num_blocks < 0) Bad("dblk_row is empty");
  if (args.data_check() != DataCheck::kFull) return l;
  CheckOffsets(l.blk_row, l.num_blocks, n, "dblk_row");
  CheckOffsets(l.blk_run, l.num_blocks, q, "dblk_run");
  CheckOffsets(l.run_seg, q, s, "drun_seg");
  CheckOffsets(l.seg_edge, s, e, "seg_edge");
  CheckHierarchy(l.num_blocks, l.blk_row, l.blk_run, l.run_rel, l.run_seg, l.seg_dst, l.seg_edge, r, "dst");
  CheckIndices(l.edge_src, e, m, "dedge_src");
  return l;
}

SrcLayout ReadSrcLayout(const KernelArgs& args, int first, int64_t m, int64_t r, int64_t num_segs) {
  SrcLayout l;
  int64_t c1 = kUnbound, p = kUnbound, p1 = kUnbound, u = kUnbound, u1 = kUnbound, e = kUnbound;
  l.blk_row = args.In<int64_t>(first, "sblk_row", {&c1});
  l.blk_run = args.In<int64_t>(first + 1, "sblk_run", {&c1});
  l.run_rel = args.In<int32_t>(first + 2, "srun_rel", {&p});
  p1 = p + 1;
  l.run_pair = args.In<int64_t>(first + 3, "srun_pair", {&p1});
  l.pair_src = args.In<int32_t>(first + 4, "pair_src", {&u});
  u1 = u + 1;
  l.pair_edge = args.In<int64_t>(first + 5, "pair_edge", {&u1});
  l.edge_seg = args.In<int32_t>(first + 6, "sedge_seg", {&e});
  l.num_blocks = c1 - 1;
  l.num_runs = p;
  l.num_pairs = u;
  l.num_edges = e;
  if (l.num_blocks < 0) Bad("sblk_row is empty");
  if (args.data_check() != DataCheck::kFull) return l;
  CheckOffsets(l.blk_row, l.num_blocks, m, "sblk_row");
  CheckOffsets(l.blk_run, l.num_blocks, p, "sblk_run");
  CheckOffsets(l.run_pair, p, u, "srun_pair");
  CheckOffsets(l.pair_edge, u, e, "pair_edge");
  CheckHierarchy(l.num_blocks, l.blk_row, l.blk_run, l.run_rel, l.run_pair, l.pair_src, l.pair_edge, r, "src");
  CheckIndices(l.edge_seg, e, num_segs, "sedge_seg");
  return l;
}

const int32_t* ReadEdgePair(const KernelArgs& args, int index, int64_t e, int64_t num_pairs) {
  const int32_t* pairs = args.In<int32_t>(index, "dedge_pair", {&e});
  if (args.data_check() == DataCheck::kFull) CheckIndices(pairs, e, num_pairs, "dedge_pair");
  return pairs;
}

}  // namespace tessel::kernels::rgnn
