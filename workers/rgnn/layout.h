// RelationLayout: a worker's edges in Hector's "separate COO" form, as the rgnn kernels take them.
// Edges are sorted by (relation, src row); each unique (relation, src) pair is one compact row, so
// the typed linear runs once per pair rather than once per edge (compact materialisation).
// Thread safety: immutable after Build. Failure: kBadData on inconsistent partitions.
#pragma once

#include "core/status.h"
#include "core/tensor.h"
#include "storage/partition.h"
#include "workers/rgnn/rgnn_settings.h"

namespace tessel::workers {

struct RelationLayout {
  int64_t num_relations = 0;
  int64_t num_edges = 0;
  int64_t num_uniq = 0;  // U: unique (relation, src) pairs
  int64_t num_dst = 0;   // owned rows
  Tensor uniq_ptr;       // i64[R+1]
  Tensor uniq_src;       // i64[U] input row of each compact row
  Tensor uniq_edge_ptr;  // i64[U+1]
  Tensor edge_uniq;      // i64[E]
  Tensor dst;            // i64[E]
  Tensor dst_ptr;        // i64[N+1] CSR over destinations
  Tensor dst_edges;      // i64[E]
  Tensor norm;           // [E] 1 / |N_r(dst)|, the R-GCN normalisation, in the executor's dtype (f32 or f64)

  // With Compaction::kPerEdge every edge is its own compact row (the typed linear then runs per edge).
  static Result<RelationLayout> Build(const storage::WorkerPartition& p,
                                      Compaction compaction = Compaction::kPerUniquePair,
                                      DType norm_dtype = DType::kF32);
};

}  // namespace tessel::workers
