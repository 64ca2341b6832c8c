// A random relational graph in the SEGMENT LAYOUT of the fused RGNN kernels (<tessel/ops/rgnn.h>), built
// from a raw edge list by plain loops: for the conformance run of `tessel plugin check` and for the
// fused-kernel tests. It is written independently of the host's builder (workers/rgnn/segment_layout.h)
// and of the kernels; small block sizes make even tiny graphs span several blocks, runs and tiles.
// Thread safety: pure functions on values.
#pragma once

#include <cstdint>
#include <vector>

namespace tessel::workers {

struct RawEdge {
  int64_t src = 0, dst = 0;
  int32_t rel = 0;
};

struct SegmentOptions {
  int64_t dst_block_rows = 4;  // output rows per dst block
  int64_t src_block_rows = 5;  // input rows per src block
  bool compact = true;         // false: every edge is its own segment and its own pair
};

struct SegmentGraph {
  int64_t m = 0, n = 0, r = 0;  // input rows, output rows, relations
  std::vector<RawEdge> edges;   // as given
  // DST layout, and for each dst-major edge the index of the raw edge it is.
  std::vector<int64_t> dblk_row, dblk_run, drun_seg, seg_edge;
  std::vector<int32_t> drun_rel, seg_dst, dedge_src, dedge_pair;
  std::vector<int64_t> dedge_raw;
  // SRC layout.
  std::vector<int64_t> sblk_row, sblk_run, srun_pair, pair_edge;
  std::vector<int32_t> srun_rel, pair_src, sedge_seg;
  std::vector<int64_t> sedge_raw;
  std::vector<double> seg_norm;  // 1 / |N_r(i)| of each segment's (relation, destination)
  int64_t num_segs() const { return static_cast<int64_t>(seg_dst.size()); }
  int64_t num_pairs() const { return static_cast<int64_t>(pair_src.size()); }
  int64_t num_edges() const { return static_cast<int64_t>(edges.size()); }
};

SegmentGraph BuildSegmentGraph(int64_t m, int64_t n, int64_t r, std::vector<RawEdge> edges,
                               const SegmentOptions& options = {});

// A random graph: n <= m; sources drawn from `distinct_sources` rows so that pairs repeat; parallel edges
// of one and of different relations; destination n-1 has no edge; relation 1 (when r > 2) is empty.
SegmentGraph RandomSegmentGraph(int64_t m, int64_t n, int64_t r, int64_t num_edges, int64_t distinct_sources,
                                uint64_t seed, const SegmentOptions& options = {});

}  // namespace tessel::workers
