// SegmentLayout: a worker's edges in the layout of the fused RGNN kernels (<tessel/ops/rgnn.h>, "SEGMENT
// LAYOUT"): destination-major (blocks of output rows -> runs of one relation -> segments (r, i) -> edges)
// for the forward passes, source-major (blocks of input rows -> runs -> pairs (r, j) -> edges) for the
// backward ones, with the maps between them. Built once per job from the partition.
//
// Blocks are cut so that each holds about the same number of edges; they are the unit of parallel work,
// and the results depend on them (never on the thread count).
// Ownership: a value that owns its tensors. Thread safety: immutable after Build.
// Failure: kBadData on an inconsistent partition; kInternal past the layout's 32-bit row and edge ids.
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "storage/partition.h"
#include "workers/executor.h"
#include "workers/rgnn/rgnn_settings.h"

namespace tessel::workers {

struct SegmentLayout {
  int64_t num_rows = 0;       // M: input rows (owned + halo)
  int64_t num_dst = 0;        // N: output rows (owned)
  int64_t num_relations = 0;  // R
  int64_t num_edges = 0;      // E
  int64_t num_segs = 0;       // S: unique (relation, destination), or E without compaction
  int64_t num_pairs = 0;      // U: unique (relation, source), or E without compaction

  // DST side, in the kernels' order.
  Tensor dblk_row, dblk_run, drun_rel, drun_seg, seg_dst, seg_edge, dedge_src;
  Tensor dedge_pair;  // i32[E]: the pair of each dst-major edge (empty unless Options::edge_pairs)
  // SRC side.
  Tensor sblk_row, sblk_run, srun_rel, srun_pair, pair_src, pair_edge, sedge_seg;
  Tensor seg_norm;  // [S] (f32 or f64): 1 / |N_r(i)| of each segment's (relation, destination)

  // Pointers to the 7 tensors of each side, to append to a kernel call.
  void AppendDst(std::vector<const Tensor*>& inputs) const;
  void AppendSrc(std::vector<const Tensor*>& inputs) const;
  int64_t bytes() const;

  // The block size for `edges` edges and `threads` CPU threads: four blocks per thread for balance, and
  // no fewer than 8, so that each block's per-relation GEMMs stay wide (FB15k-237 RGCN, 2 threads: a
  // median 64 ms per epoch at E / 8 against 72 ms at E / 16, four runs each); clamped to [8192, 262144].
  static int64_t BlockEdgesFor(int64_t edges, int64_t threads);

  struct Options {
    Compaction compaction = Compaction::kPerUniquePair;
    // 0 picks E / 16 clamped to [8192, 262144]: 16 blocks (fewer below 131k edges, more past 4.2M), big
    // enough that a block holds more than a few segments of each relation for its GEMM tiles (FB15k-237, one
    // thread: 5 rows a tile and 128 ms an epoch at E / 64; 114 ms at E / 16).
    int64_t target_block_edges = 0;
    DType norm_dtype = DType::kF32;  // seg_norm's: the executor's, f32 or f64
    bool edge_pairs = true;          // dedge_pair, for the models that read it (RgnnModel::ReadsEdgePairs)
  };
  // `device` receives the tensors. `group_size` (by edge of `p`), when given, is each edge's |N_r(i)|
  // (seg_norm's denominator) where `p` is one block of a partition's edges.
  static Result<SegmentLayout> Build(const storage::WorkerPartition& p, const DeviceContext& device,
                                     const Options& options, const std::vector<int32_t>* group_size = nullptr);

  // One layout per block of input rows [begin, end) (train.halo = "streamed"): the partition's edges whose
  // source is in the block, the block's rows renumbered from 0, every owned row a destination, and seg_norm
  // the whole partition's 1 / |N_r(i)| (so that the blocks' outputs add up to the partition's). Each block's
  // target_block_edges is BlockEdgesFor(its edges, threads).
  struct RowRange {
    int64_t begin = 0, end = 0;
  };
  static Result<std::vector<SegmentLayout>> BuildSourceBlocks(const storage::WorkerPartition& p,
                                                              const std::vector<RowRange>& blocks,
                                                              const DeviceContext& device, int64_t threads,
                                                              Options options);
};

}  // namespace tessel::workers
