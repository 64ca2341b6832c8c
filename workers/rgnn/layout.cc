#include "workers/rgnn/layout.h"

#include <vector>

namespace tessel::workers {

Result<RelationLayout> RelationLayout::Build(const storage::WorkerPartition& p, Compaction compaction,
                                             DType norm_dtype) {
  const bool compact = compaction == Compaction::kPerUniquePair;
  RelationLayout l;
  l.num_relations = p.num_relations();
  l.num_edges = static_cast<int64_t>(p.src.size());
  l.num_dst = p.num_owned;
  const int64_t R = l.num_relations, E = l.num_edges, N = l.num_dst;
  if (static_cast<int64_t>(p.rel_ptr.size()) != R + 1 || p.rel_ptr[R] != E) {
    return BadDataError("partition " + std::to_string(p.part) + ": rel_ptr does not cover the edges");
  }

  // Compact rows: a new one whenever (relation, src) changes; edges are sorted by (relation, src).
  std::vector<int64_t> uniq_ptr(static_cast<size_t>(R + 1), 0), uniq_src, uniq_edge_ptr,
      edge_uniq(static_cast<size_t>(E));
  uniq_src.reserve(static_cast<size_t>(E));
  uniq_edge_ptr.reserve(static_cast<size_t>(E) + 1);
  for (int64_t r = 0; r < R; ++r) {
    uniq_ptr[static_cast<size_t>(r)] = static_cast<int64_t>(uniq_src.size());
    int64_t prev = -1;
    for (int64_t e = p.rel_ptr[static_cast<size_t>(r)]; e < p.rel_ptr[static_cast<size_t>(r) + 1]; ++e) {
      const int64_t s = p.src[static_cast<size_t>(e)];
      if (s < prev) return BadDataError("partition edges are not sorted by (relation, src)");
      if (s != prev || !compact) {
        uniq_src.push_back(s);
        uniq_edge_ptr.push_back(e);
        prev = s;
      }
      edge_uniq[static_cast<size_t>(e)] = static_cast<int64_t>(uniq_src.size()) - 1;
    }
  }
  uniq_ptr[static_cast<size_t>(R)] = static_cast<int64_t>(uniq_src.size());
  uniq_edge_ptr.push_back(E);
  l.num_uniq = static_cast<int64_t>(uniq_src.size());

  // norm = 1 / in-degree per (relation, dst); counts kept in one array reset per relation.
  std::vector<int32_t> count(static_cast<size_t>(N), 0);
  std::vector<float> norm(static_cast<size_t>(E));
  std::vector<double> norm64(norm_dtype == DType::kF64 ? static_cast<size_t>(E) : 0);  // each divided in double
  std::vector<int64_t> dst_ptr(static_cast<size_t>(N + 1), 0);
  for (int64_t r = 0; r < R; ++r) {
    const int64_t b = p.rel_ptr[static_cast<size_t>(r)], e_end = p.rel_ptr[static_cast<size_t>(r) + 1];
    for (int64_t e = b; e < e_end; ++e) {
      const int64_t d = p.dst[static_cast<size_t>(e)];
      if (d < 0 || d >= N) return BadDataError("partition edge destination out of the owned range");
      ++count[static_cast<size_t>(d)];
    }
    for (int64_t e = b; e < e_end; ++e) {
      const int32_t n = count[static_cast<size_t>(p.dst[static_cast<size_t>(e)])];
      norm[static_cast<size_t>(e)] = 1.0f / static_cast<float>(n);
      if (!norm64.empty()) norm64[static_cast<size_t>(e)] = 1.0 / static_cast<double>(n);
    }
    for (int64_t e = b; e < e_end; ++e) count[static_cast<size_t>(p.dst[static_cast<size_t>(e)])] = 0;
  }

  // CSR by destination; a stable counting sort keeps each node's in-edges in (relation, src) order.
  for (int64_t e = 0; e < E; ++e) ++dst_ptr[static_cast<size_t>(p.dst[static_cast<size_t>(e)]) + 1];
  for (int64_t i = 0; i < N; ++i) dst_ptr[static_cast<size_t>(i + 1)] += dst_ptr[static_cast<size_t>(i)];
  std::vector<int64_t> fill(dst_ptr.begin(), dst_ptr.end() - 1), dst_edges(static_cast<size_t>(E));
  for (int64_t e = 0; e < E; ++e)
    dst_edges[static_cast<size_t>(fill[static_cast<size_t>(p.dst[static_cast<size_t>(e)])]++)] = e;

  auto to_tensor = [](const auto& v, Tensor* out) -> Status {
    using T = typename std::decay_t<decltype(v)>::value_type;
    TESSEL_ASSIGN_OR_RETURN(*out, Tensor::Empty(DTypeOf<T>(), {static_cast<int64_t>(v.size())}));
    std::copy(v.begin(), v.end(), out->template data<T>());
    return Status();
  };
  TESSEL_RETURN_IF_ERROR(to_tensor(uniq_ptr, &l.uniq_ptr));
  TESSEL_RETURN_IF_ERROR(to_tensor(uniq_src, &l.uniq_src));
  TESSEL_RETURN_IF_ERROR(to_tensor(uniq_edge_ptr, &l.uniq_edge_ptr));
  TESSEL_RETURN_IF_ERROR(to_tensor(edge_uniq, &l.edge_uniq));
  TESSEL_RETURN_IF_ERROR(to_tensor(p.dst, &l.dst));
  TESSEL_RETURN_IF_ERROR(to_tensor(dst_ptr, &l.dst_ptr));
  TESSEL_RETURN_IF_ERROR(to_tensor(dst_edges, &l.dst_edges));
  TESSEL_RETURN_IF_ERROR(norm64.empty() ? to_tensor(norm, &l.norm) : to_tensor(norm64, &l.norm));
  return l;
}

}  // namespace tessel::workers
