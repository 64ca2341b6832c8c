#include "workers/rgnn/segment_layout.h"

#include <algorithm>
#include <limits>

namespace tessel::workers {
namespace {

constexpr int64_t kMaxId = std::numeric_limits<int32_t>::max();

// Cuts [0, rows) into blocks of about `target` edges each (a row's edges never split), from per-row
// degrees. Returns the block boundaries [blocks + 1] and fills block_of[row].
std::vector<int64_t> CutBlocks(const std::vector<int64_t>& degree, int64_t target, std::vector<int32_t>& block_of) {
  std::vector<int64_t> bounds = {0};
  const int64_t rows = static_cast<int64_t>(degree.size());
  block_of.assign(static_cast<size_t>(rows), 0);
  int64_t acc = 0;
  for (int64_t i = 0; i < rows; ++i) {
    block_of[static_cast<size_t>(i)] = static_cast<int32_t>(bounds.size() - 1);
    acc += degree[static_cast<size_t>(i)];
    if (acc >= target && i + 1 < rows) {
      bounds.push_back(i + 1);
      acc = 0;
    }
  }
  bounds.push_back(rows);
  return bounds;
}

template <typename T>
Result<Tensor> HostTensor(int64_t n) {
  return Tensor::Empty(DTypeOf<T>(), {n});
}

template <typename T>
Result<Tensor> FromVector(const std::vector<T>& v) {
  TESSEL_ASSIGN_OR_RETURN(Tensor t, HostTensor<T>(static_cast<int64_t>(v.size())));
  std::copy(v.begin(), v.end(), t.data<T>());
  return t;
}

// One side of the layout walked in its order: runs where (block, relation) changes, items where (row,
// relation) changes (every edge without compaction).
struct SideOut {
  std::vector<int64_t> blk_run;  // [blocks + 1]
  std::vector<int32_t> run_rel;
  std::vector<int64_t> run_item;
  Tensor item_row, item_edge;    // i32[items], i64[items + 1]
  std::vector<int32_t> item_of;  // [E] by original edge id
};

// `order[k]` is the original edge at position k of this side; `row_of(e)`, `rel_of(e)` and `block_of_row`
// give each edge's row, relation and the block of a row.
template <typename RowOf, typename RelOf>
Result<SideOut> WalkSide(const std::vector<int32_t>& order, int64_t num_blocks,
                         const std::vector<int32_t>& block_of_row, RowOf row_of, RelOf rel_of, Compaction compaction) {
  SideOut out;
  const int64_t e_count = static_cast<int64_t>(order.size());
  const bool compact = compaction == Compaction::kPerUniquePair;
  // First pass: count the items, to allocate them exactly.
  int64_t items = 0;
  for (int64_t k = 0; k < e_count; ++k) {
    const int32_t e = order[static_cast<size_t>(k)];
    const bool new_item = !compact || k == 0 || row_of(e) != row_of(order[static_cast<size_t>(k - 1)]) ||
                          rel_of(e) != rel_of(order[static_cast<size_t>(k - 1)]);
    items += new_item ? 1 : 0;
  }
  TESSEL_ASSIGN_OR_RETURN(out.item_row, HostTensor<int32_t>(items));
  TESSEL_ASSIGN_OR_RETURN(out.item_edge, HostTensor<int64_t>(items + 1));
  int32_t* item_row = out.item_row.data<int32_t>();
  int64_t* item_edge = out.item_edge.data<int64_t>();
  out.item_of.assign(static_cast<size_t>(e_count), 0);
  out.blk_run.assign(static_cast<size_t>(num_blocks + 1), 0);
  int64_t item = -1;
  int64_t last_block = -1, last_rel = -1, last_row = -1;
  for (int64_t k = 0; k < e_count; ++k) {
    const int32_t e = order[static_cast<size_t>(k)];
    const int64_t row = row_of(e), rel = rel_of(e), block = block_of_row[static_cast<size_t>(row)];
    if (block != last_block || rel != last_rel) {
      for (int64_t b = last_block + 1; b <= block; ++b)
        out.blk_run[static_cast<size_t>(b)] = static_cast<int64_t>(out.run_rel.size());
      out.run_rel.push_back(static_cast<int32_t>(rel));
      out.run_item.push_back(item + 1);
      last_row = -1;
    }
    if (!compact || row != last_row || block != last_block || rel != last_rel) {
      ++item;
      item_row[item] = static_cast<int32_t>(row);
      item_edge[item] = k;
    }
    out.item_of[static_cast<size_t>(e)] = static_cast<int32_t>(item);
    last_block = block;
    last_rel = rel;
    last_row = row;
  }
  for (int64_t b = last_block + 1; b <= num_blocks; ++b)
    out.blk_run[static_cast<size_t>(b)] = static_cast<int64_t>(out.run_rel.size());
  out.run_item.push_back(items);
  item_edge[items] = e_count;
  return out;
}

Status ToDevice(Tensor& t, const DeviceContext& device) {
  if (device.device == Device::kCpu) return Status();
  TESSEL_ASSIGN_OR_RETURN(Tensor d, Tensor::Empty(t.dtype(), t.shape(), *device.allocator));
  TESSEL_RETURN_IF_ERROR(CopyMemory(d.raw(), device.device, t.raw(), Device::kCpu, t.nbytes(), device.stream));
  t = d;
  return Status();
}

}  // namespace

void SegmentLayout::AppendDst(std::vector<const Tensor*>& inputs) const {
  for (const Tensor* t : {&dblk_row, &dblk_run, &drun_rel, &drun_seg, &seg_dst, &seg_edge, &dedge_src})
    inputs.push_back(t);
}

void SegmentLayout::AppendSrc(std::vector<const Tensor*>& inputs) const {
  for (const Tensor* t : {&sblk_row, &sblk_run, &srun_rel, &srun_pair, &pair_src, &pair_edge, &sedge_seg})
    inputs.push_back(t);
}

int64_t SegmentLayout::bytes() const {
  int64_t total = 0;
  for (const Tensor* t : {&dblk_row, &dblk_run, &drun_rel, &drun_seg, &seg_dst, &seg_edge, &dedge_src, &dedge_pair,
                          &sblk_row, &sblk_run, &srun_rel, &srun_pair, &pair_src, &pair_edge, &sedge_seg, &seg_norm}) {
    total += static_cast<int64_t>(t->nbytes());
  }
  return total;
}

int64_t SegmentLayout::BlockEdgesFor(int64_t edges, int64_t threads) {
  return std::clamp<int64_t>(edges / std::max<int64_t>(8, 4 * threads), 8192, 262144);
}

Result<SegmentLayout> SegmentLayout::Build(const storage::WorkerPartition& p, const DeviceContext& device,
                                           const Options& options, const std::vector<int32_t>* group_size) {
  const Compaction compaction = options.compaction;
  const int64_t target_block_edges = options.target_block_edges;
  const DType norm_dtype = options.norm_dtype;
  SegmentLayout l;
  l.num_rows = p.num_rows();
  l.num_dst = p.num_owned;
  l.num_relations = p.num_relations();
  l.num_edges = static_cast<int64_t>(p.src.size());
  const int64_t E = l.num_edges, N = l.num_dst, M = l.num_rows, R = l.num_relations;
  if (E > kMaxId || M > kMaxId) {
    return InternalError(StrCat("partition ", p.part, " has ", E, " edges and ", M,
                                " rows; the segment layout indexes them with 32 bits: use more workers"));
  }
  if (static_cast<int64_t>(p.rel_ptr.size()) != R + 1 || p.rel_ptr[static_cast<size_t>(R)] != E ||
      static_cast<int64_t>(p.dst.size()) != E) {
    return BadDataError(StrCat("partition ", p.part, ": rel_ptr does not cover the edges"));
  }
  for (int64_t e = 0; e < E; ++e) {
    if (p.dst[static_cast<size_t>(e)] < 0 || p.dst[static_cast<size_t>(e)] >= N || p.src[static_cast<size_t>(e)] < 0 ||
        p.src[static_cast<size_t>(e)] >= M) {
      return BadDataError(StrCat("partition ", p.part, ": edge ", e, " leaves the rows"));
    }
  }
  const int64_t target = target_block_edges > 0 ? target_block_edges : std::clamp<int64_t>(E / 16, 8192, 262144);
  const auto rel_of = [&](int32_t e) {
    return static_cast<int64_t>(std::upper_bound(p.rel_ptr.begin(), p.rel_ptr.end(), static_cast<int64_t>(e)) -
                                p.rel_ptr.begin() - 1);
  };
  const auto dst_of = [&](int32_t e) { return p.dst[static_cast<size_t>(e)]; };
  const auto src_of = [&](int32_t e) { return p.src[static_cast<size_t>(e)]; };

  // ---- Destination side: blocks, then edges sorted by (block, relation, destination, source).
  std::vector<int32_t> dst_block_of, src_block_of;
  std::vector<int64_t> dst_bounds, src_bounds;
  {
    std::vector<int64_t> degree(static_cast<size_t>(N), 0);
    for (int64_t e = 0; e < E; ++e) ++degree[static_cast<size_t>(p.dst[static_cast<size_t>(e)])];
    dst_bounds = CutBlocks(degree, target, dst_block_of);
  }
  {
    std::vector<int64_t> degree(static_cast<size_t>(M), 0);
    for (int64_t e = 0; e < E; ++e) ++degree[static_cast<size_t>(p.src[static_cast<size_t>(e)])];
    src_bounds = CutBlocks(degree, target, src_block_of);
  }
  const int64_t dst_blocks = static_cast<int64_t>(dst_bounds.size()) - 1;
  const int64_t src_blocks = static_cast<int64_t>(src_bounds.size()) - 1;

  std::vector<int32_t> order(static_cast<size_t>(E));
  {
    // Stable counting sort by destination (the partition's order, (relation, source, destination),
    // breaks ties), then by bucket (block, relation), which keeps destinations, then sources, in order.
    std::vector<int64_t> cursor(static_cast<size_t>(N + 1), 0);
    for (int64_t e = 0; e < E; ++e) ++cursor[static_cast<size_t>(p.dst[static_cast<size_t>(e)]) + 1];
    for (int64_t i = 0; i < N; ++i) cursor[static_cast<size_t>(i + 1)] += cursor[static_cast<size_t>(i)];
    std::vector<int32_t> by_dst(static_cast<size_t>(E));
    for (int64_t e = 0; e < E; ++e)
      by_dst[static_cast<size_t>(cursor[static_cast<size_t>(p.dst[static_cast<size_t>(e)])]++)] =
          static_cast<int32_t>(e);
    std::vector<int64_t> bucket(static_cast<size_t>(dst_blocks * R + 1), 0);
    const auto bucket_of = [&](int32_t e) { return dst_block_of[static_cast<size_t>(dst_of(e))] * R + rel_of(e); };
    for (int32_t e : by_dst) ++bucket[static_cast<size_t>(bucket_of(e)) + 1];
    for (size_t b = 1; b < bucket.size(); ++b) bucket[b] += bucket[b - 1];
    for (int32_t e : by_dst) order[static_cast<size_t>(bucket[static_cast<size_t>(bucket_of(e))]++)] = e;
  }
  TESSEL_ASSIGN_OR_RETURN(
      SideOut dst_side, WalkSide(
                            order, dst_blocks, dst_block_of, dst_of, [&](int32_t e) { return rel_of(e); }, compaction));
  l.num_segs = dst_side.item_row.numel();
  std::vector<int32_t> dpos(static_cast<size_t>(options.edge_pairs ? E : 0));  // each edge's dst-major position
  TESSEL_ASSIGN_OR_RETURN(l.dedge_src, HostTensor<int32_t>(E));
  for (int64_t k = 0; k < E; ++k) {
    const int32_t e = order[static_cast<size_t>(k)];
    if (options.edge_pairs) dpos[static_cast<size_t>(e)] = static_cast<int32_t>(k);
    l.dedge_src.data<int32_t>()[k] = static_cast<int32_t>(src_of(e));
  }
  // seg_norm: 1 / |N_r(i)|, the size of each (relation, destination) group (several segments of one
  // group without compaction).
  if (norm_dtype == DType::kF64) {
    TESSEL_ASSIGN_OR_RETURN(l.seg_norm, HostTensor<double>(l.num_segs));
  } else {
    TESSEL_ASSIGN_OR_RETURN(l.seg_norm, HostTensor<float>(l.num_segs));
  }
  {
    const int64_t* seg_edge = dst_side.item_edge.data<int64_t>();
    int64_t s = 0;
    while (s < l.num_segs) {
      const int32_t first = order[static_cast<size_t>(seg_edge[s])];
      int64_t t = s, count = 0;
      if (group_size != nullptr) {  // the group's size in the whole partition, of which p holds a block
        count = (*group_size)[static_cast<size_t>(first)];
        t = s + 1;
      }
      while (group_size == nullptr && t < l.num_segs) {
        const int32_t e = order[static_cast<size_t>(seg_edge[t])];
        if (dst_of(e) != dst_of(first) || rel_of(e) != rel_of(first)) break;
        count += seg_edge[t + 1] - seg_edge[t];
        ++t;
      }
      for (int64_t u = s; u < t; ++u) {
        if (norm_dtype == DType::kF64) {
          l.seg_norm.data<double>()[u] = 1.0 / static_cast<double>(count);
        } else {
          l.seg_norm.data<float>()[u] = 1.0f / static_cast<float>(count);
        }
      }
      s = t;
    }
  }

  // ---- Source side: the partition's order is (relation, source, destination); a stable counting sort by
  // bucket (block, relation) makes it (block, relation, source, destination).
  {
    std::vector<int64_t> bucket(static_cast<size_t>(src_blocks * R + 1), 0);
    for (int64_t r = 0; r < R; ++r) {
      for (int64_t e = p.rel_ptr[static_cast<size_t>(r)]; e < p.rel_ptr[static_cast<size_t>(r) + 1]; ++e) {
        ++bucket[static_cast<size_t>(src_block_of[static_cast<size_t>(src_of(static_cast<int32_t>(e)))] * R + r) + 1];
      }
    }
    for (size_t b = 1; b < bucket.size(); ++b) bucket[b] += bucket[b - 1];
    for (int64_t r = 0; r < R; ++r) {
      for (int64_t e = p.rel_ptr[static_cast<size_t>(r)]; e < p.rel_ptr[static_cast<size_t>(r) + 1]; ++e) {
        const int64_t b = src_block_of[static_cast<size_t>(src_of(static_cast<int32_t>(e)))] * R + r;
        order[static_cast<size_t>(bucket[static_cast<size_t>(b)]++)] = static_cast<int32_t>(e);
      }
    }
  }
  TESSEL_ASSIGN_OR_RETURN(
      SideOut src_side, WalkSide(
                            order, src_blocks, src_block_of, src_of, [&](int32_t e) { return rel_of(e); }, compaction));
  l.num_pairs = src_side.item_row.numel();
  TESSEL_ASSIGN_OR_RETURN(l.sedge_seg, HostTensor<int32_t>(E));
  if (options.edge_pairs) {
    TESSEL_ASSIGN_OR_RETURN(l.dedge_pair, HostTensor<int32_t>(E));
  }
  for (int64_t k = 0; k < E; ++k) {
    const int32_t e = order[static_cast<size_t>(k)];
    l.sedge_seg.data<int32_t>()[k] = dst_side.item_of[static_cast<size_t>(e)];
    if (options.edge_pairs) {
      l.dedge_pair.data<int32_t>()[dpos[static_cast<size_t>(e)]] = src_side.item_of[static_cast<size_t>(e)];
    }
  }

  TESSEL_ASSIGN_OR_RETURN(l.dblk_row, FromVector(dst_bounds));
  TESSEL_ASSIGN_OR_RETURN(l.dblk_run, FromVector(dst_side.blk_run));
  TESSEL_ASSIGN_OR_RETURN(l.drun_rel, FromVector(dst_side.run_rel));
  TESSEL_ASSIGN_OR_RETURN(l.drun_seg, FromVector(dst_side.run_item));
  l.seg_dst = dst_side.item_row;
  l.seg_edge = dst_side.item_edge;
  TESSEL_ASSIGN_OR_RETURN(l.sblk_row, FromVector(src_bounds));
  TESSEL_ASSIGN_OR_RETURN(l.sblk_run, FromVector(src_side.blk_run));
  TESSEL_ASSIGN_OR_RETURN(l.srun_rel, FromVector(src_side.run_rel));
  TESSEL_ASSIGN_OR_RETURN(l.srun_pair, FromVector(src_side.run_item));
  l.pair_src = src_side.item_row;
  l.pair_edge = src_side.item_edge;
  for (Tensor* t :
       {&l.dblk_row, &l.dblk_run, &l.drun_rel, &l.drun_seg, &l.seg_dst, &l.seg_edge, &l.dedge_src, &l.dedge_pair,
        &l.sblk_row, &l.sblk_run, &l.srun_rel, &l.srun_pair, &l.pair_src, &l.pair_edge, &l.sedge_seg, &l.seg_norm}) {
    TESSEL_RETURN_IF_ERROR(ToDevice(*t, device));
  }
  return l;
}

Result<std::vector<SegmentLayout>> SegmentLayout::BuildSourceBlocks(const storage::WorkerPartition& p,
                                                                    const std::vector<RowRange>& blocks,
                                                                    const DeviceContext& device, int64_t threads,
                                                                    Options options) {
  const int64_t E = static_cast<int64_t>(p.src.size()), N = p.num_owned, R = p.num_relations();
  if (E > kMaxId || static_cast<int64_t>(p.dst.size()) != E || static_cast<int64_t>(p.rel_ptr.size()) != R + 1 ||
      p.rel_ptr[static_cast<size_t>(R)] != E) {
    return BadDataError(StrCat("partition ", p.part, ": rel_ptr does not cover the edges"));
  }
  // |N_r(i)| of each edge's (relation, destination) over the whole partition: its edges by destination
  // (a stable counting sort keeps the partition's relation order), then the runs of one relation.
  std::vector<int32_t> group_size(static_cast<size_t>(E), 0);
  {
    std::vector<int64_t> cursor(static_cast<size_t>(N + 1), 0);
    for (const int64_t d : p.dst) {
      if (d < 0 || d >= N) return BadDataError(StrCat("partition ", p.part, ": an edge leaves the owned rows"));
      ++cursor[static_cast<size_t>(d) + 1];
    }
    for (int64_t i = 0; i < N; ++i) cursor[static_cast<size_t>(i + 1)] += cursor[static_cast<size_t>(i)];
    std::vector<int32_t> by_dst(static_cast<size_t>(E)), rel(static_cast<size_t>(E));
    std::vector<int64_t> next(cursor.begin(), cursor.end() - 1);
    for (int64_t r = 0; r < R; ++r) {
      for (int64_t e = p.rel_ptr[static_cast<size_t>(r)]; e < p.rel_ptr[static_cast<size_t>(r) + 1]; ++e) {
        by_dst[static_cast<size_t>(next[static_cast<size_t>(p.dst[static_cast<size_t>(e)])]++)] =
            static_cast<int32_t>(e);
        rel[static_cast<size_t>(e)] = static_cast<int32_t>(r);
      }
    }
    for (int64_t k = 0; k < E;) {
      int64_t end = k;
      const int32_t first = by_dst[static_cast<size_t>(k)];
      while (end < E &&
             p.dst[static_cast<size_t>(by_dst[static_cast<size_t>(end)])] == p.dst[static_cast<size_t>(first)] &&
             rel[static_cast<size_t>(by_dst[static_cast<size_t>(end)])] == rel[static_cast<size_t>(first)]) {
        ++end;
      }
      for (int64_t u = k; u < end; ++u)
        group_size[static_cast<size_t>(by_dst[static_cast<size_t>(u)])] = static_cast<int32_t>(end - k);
      k = end;
    }
  }
  // Each block's edges: within a relation the partition's edges are sorted by source, so a block's are a
  // run; their sources become rows of the block.
  std::vector<SegmentLayout> out;
  for (const RowRange& b : blocks) {
    storage::WorkerPartition sub;
    sub.part = p.part;
    sub.num_owned = N;
    sub.relation_names = p.relation_names;
    sub.row_new_id.assign(static_cast<size_t>(b.end - b.begin), 0);  // sizes the block's rows
    sub.rel_ptr.assign(1, 0);
    std::vector<int32_t> sizes;
    for (int64_t r = 0; r < R; ++r) {
      const auto first = p.src.begin() + p.rel_ptr[static_cast<size_t>(r)];
      const auto last = p.src.begin() + p.rel_ptr[static_cast<size_t>(r) + 1];
      for (auto it = std::lower_bound(first, last, b.begin); it != last && *it < b.end; ++it) {
        const auto e = static_cast<size_t>(it - p.src.begin());
        sub.src.push_back(*it - b.begin);
        sub.dst.push_back(p.dst[e]);
        sizes.push_back(group_size[e]);
      }
      sub.rel_ptr.push_back(static_cast<int64_t>(sub.src.size()));
    }
    options.target_block_edges = BlockEdgesFor(static_cast<int64_t>(sub.src.size()), threads);
    TESSEL_ASSIGN_OR_RETURN(SegmentLayout l, Build(sub, device, options, &sizes));
    out.push_back(std::move(l));
  }
  return out;
}

}  // namespace tessel::workers
