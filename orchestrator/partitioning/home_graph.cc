#include "orchestrator/partitioning/home_graph.h"

#include <fstream>

#include "core/logging.h"
#include "storage/digest.h"

namespace tessel::orchestrator {

using storage::ChunkedGraph;
using storage::HeteroGraph;
using storage::RelationKind;

Result<int64_t> FeatureWidth(const ChunkedGraph& cg, const storage::ChunkedImportOptions& o) {
  std::vector<int64_t> dims;
  for (size_t t = 0; t < cg.node_types.size(); ++t) {
    TESSEL_ASSIGN_OR_RETURN(const storage::ChunkedNodeRows rows,
                            storage::ReadNodeRows(cg, o, static_cast<int32_t>(t), 0, 0));
    dims.push_back(cg.node_types[t].count > 0 ? rows.feature_dim : 0);
  }
  const bool same = std::all_of(dims.begin(), dims.end(), [&](int64_t d) { return d == dims.front(); });
  return dims.empty() || !same ? 0 : dims.front();
}

Status ReadHome(const ChunkedGraph& cg, const storage::ChunkedImportOptions& o, const Layout& layout, int rank,
                Home* home) {
  home->lo = layout.home[static_cast<size_t>(rank)];
  home->hi = layout.home[static_cast<size_t>(rank) + 1];
  const size_t types = cg.node_types.size();
  std::vector<storage::ChunkedNodeRows> rows(types);
  for (size_t t = 0; t < types; ++t) {
    const int64_t off = layout.type_offsets[t], count = cg.node_types[t].count;
    const int64_t a = std::clamp(home->lo, off, off + count), b = std::clamp(home->hi, off, off + count);
    TESSEL_ASSIGN_OR_RETURN(rows[t], storage::ReadNodeRows(cg, o, static_cast<int32_t>(t), a - off, b - a,
                                                           storage::NodeColumns::kSupervision));
  }
  TESSEL_ASSIGN_OR_RETURN(home->feature_dim, FeatureWidth(cg, o));
  const auto n = static_cast<size_t>(home->size());
  home->labels.assign(n, -1);
  home->train.assign(n, 0);
  home->val.assign(n, 0);
  home->test.assign(n, 0);
  for (size_t t = 0; t < types; ++t) {
    const int64_t off = layout.type_offsets[t], count = cg.node_types[t].count;
    const int64_t a = std::clamp(home->lo, off, off + count), b = std::clamp(home->hi, off, off + count);
    const auto at = static_cast<size_t>(a - home->lo);
    const storage::ChunkedNodeRows& r = rows[t];
    std::copy(r.labels.begin(), r.labels.end(), home->labels.begin() + static_cast<ptrdiff_t>(at));
    std::copy(r.train_mask.begin(), r.train_mask.end(), home->train.begin() + static_cast<ptrdiff_t>(at));
    std::copy(r.val_mask.begin(), r.val_mask.end(), home->val.begin() + static_cast<ptrdiff_t>(at));
    std::copy(r.test_mask.begin(), r.test_mask.end(), home->test.begin() + static_cast<ptrdiff_t>(at));
    (void)b;
  }
  for (const int64_t l : home->labels) home->max_label = std::max(home->max_label, l);
  return Status::Ok();
}

Status ReadEdges(const ChunkedGraph& cg, const HeteroGraph& skeleton, const Layout& layout, const RankGroup& group,
                 bool add_inverse, std::vector<Edge>* in_edges, std::vector<Edge>* out_pairs) {
  const int ranks = group.size();
  const auto base = static_cast<int32_t>(cg.edge_types.size());
  std::vector<std::vector<Edge>> to_dst(static_cast<size_t>(ranks)), to_src(static_cast<size_t>(ranks));
  std::vector<int64_t> counts(static_cast<size_t>(base), 0);
  Status st;
  int64_t index = 0;
  std::vector<int64_t> src, dst;
  for (int32_t e = 0; e < base && st.ok(); ++e) {
    const storage::ChunkedEdgeType& et = cg.edge_types[static_cast<size_t>(e)];
    const int64_t so = layout.type_offsets[static_cast<size_t>(et.src_type)];
    const int64_t doff = layout.type_offsets[static_cast<size_t>(et.dst_type)];
    for (int32_t c = 0; c < static_cast<int32_t>(et.files.paths.size()); ++c, ++index) {
      if (index % ranks != group.rank()) continue;
      src.clear();
      dst.clear();
      st = storage::ReadEdgeChunk(cg, e, c, &src, &dst);
      if (!st.ok()) break;
      counts[static_cast<size_t>(e)] += static_cast<int64_t>(src.size());
      for (size_t i = 0; i < src.size(); ++i) {
        const int64_t s = so + src[i], d = doff + dst[i];
        to_dst[static_cast<size_t>(layout.HomeOf(d))].emplace_back(s, d, e);
        if (add_inverse) {
          to_dst[static_cast<size_t>(layout.HomeOf(s))].emplace_back(d, s, base + e);
        } else if (s != d) {
          to_src[static_cast<size_t>(layout.HomeOf(s))].emplace_back(d, s, e);
        }
      }
    }
  }
  TESSEL_RETURN_IF_ERROR(group.Agree(st));
  TESSEL_RETURN_IF_ERROR(group.Sum(counts.data(), base));
  for (int32_t e = 0; e < base; ++e) {
    const storage::ChunkedEdgeType& et = cg.edge_types[static_cast<size_t>(e)];
    if (counts[static_cast<size_t>(e)] != et.count) {
      return BadDataError(StrCat(cg.metadata_path, ": edge type '", et.canonical, "': its chunks hold ",
                                 counts[static_cast<size_t>(e)], " edges, metadata.json says ", et.count));
    }
  }
  TESSEL_ASSIGN_OR_RETURN(*in_edges, group.Exchange(to_dst));
  to_dst = {};
  TESSEL_ASSIGN_OR_RETURN(*out_pairs, group.Exchange(to_src));
  // Self-loops are made where they land.
  const int64_t lo = layout.home[static_cast<size_t>(group.rank())];
  const int64_t hi = layout.home[static_cast<size_t>(group.rank()) + 1];
  for (int32_t r = 0; r < static_cast<int32_t>(skeleton.relations.size()); ++r) {
    const storage::Relation& rel = skeleton.relations[static_cast<size_t>(r)];
    if (rel.kind != RelationKind::kSelfLoop) continue;
    const int64_t a = std::max(lo, layout.type_offsets[static_cast<size_t>(rel.src_type)]);
    const int64_t b = std::min(hi, layout.type_offsets[static_cast<size_t>(rel.src_type) + 1]);
    for (int64_t v = a; v < b; ++v) in_edges->emplace_back(v, v, r);
  }
  return Status::Ok();
}

void BuildAdjacency(const HeteroGraph& skeleton, const Home& home, const std::vector<Edge>& in_edges,
                    const std::vector<Edge>& out_pairs, std::vector<int64_t>* ptr, std::vector<int64_t>* adj) {
  const auto n = static_cast<size_t>(home.size());
  ptr->assign(n + 1, 0);
  const auto counts = [&](const Edge& e) {
    return e.src != e.dst() && skeleton.relations[static_cast<size_t>(e.rel())].kind != RelationKind::kSelfLoop;
  };
  for (const std::vector<Edge>* list : {&in_edges, &out_pairs}) {
    for (const Edge& e : *list) {
      if (counts(e)) ++(*ptr)[static_cast<size_t>(e.dst() - home.lo) + 1];
    }
  }
  for (size_t i = 0; i < n; ++i) (*ptr)[i + 1] += (*ptr)[i];
  adj->resize(static_cast<size_t>(ptr->back()));
  std::vector<int64_t> cursor(ptr->begin(), ptr->end() - 1);
  for (const std::vector<Edge>* list : {&in_edges, &out_pairs}) {
    for (const Edge& e : *list) {
      if (counts(e)) (*adj)[static_cast<size_t>(cursor[static_cast<size_t>(e.dst() - home.lo)]++)] = e.src;
    }
  }
  // Sort and deduplicate each list in place, compacting.
  int64_t w = 0;
  for (size_t i = 0; i < n; ++i) {
    const auto b = adj->begin() + (*ptr)[i], e = adj->begin() + (*ptr)[i + 1];
    std::sort(b, e);
    const auto end = std::unique(b, e);
    const int64_t start = w;
    for (auto it = b; it != end; ++it) (*adj)[static_cast<size_t>(w++)] = *it;
    (*ptr)[i] = start;
  }
  (*ptr)[n] = w;
  adj->resize(static_cast<size_t>(w));
  adj->shrink_to_fit();
}

Result<std::string> InputHash(const RankGroup& group, const ChunkedGraph& cg, const std::string& options) {
  std::vector<std::string> files{cg.metadata_path};
  for (const storage::ChunkedEdgeType& et : cg.edge_types) {
    files.insert(files.end(), et.files.paths.begin(), et.files.paths.end());
  }
  for (const storage::ChunkedNodeType& nt : cg.node_types) {
    for (const storage::ChunkedNodeData& d : nt.data) {
      files.insert(files.end(), d.files.paths.begin(), d.files.paths.end());
    }
  }
  std::vector<int64_t> digests(files.size(), 0);
  Status st;
  std::vector<char> block(size_t{1} << 20);
  for (size_t i = static_cast<size_t>(group.rank()); i < files.size() && st.ok();
       i += static_cast<size_t>(group.size())) {
    std::ifstream in(files[i], std::ios::binary);
    if (!in) {
      st = BadDataError(StrCat(files[i], ": cannot open (listed in ", cg.metadata_path, ")"));
      break;
    }
    storage::Digest d;
    while (in) {
      in.read(block.data(), static_cast<std::streamsize>(block.size()));
      d.Bytes(block.data(), static_cast<size_t>(in.gcount()));
    }
    if (in.bad()) st = StorageError(StrCat(files[i], ": read failed"));
    digests[i] = static_cast<int64_t>(d.Value());
  }
  TESSEL_RETURN_IF_ERROR(group.Agree(st));
  TESSEL_RETURN_IF_ERROR(group.Sum(digests.data(), static_cast<int64_t>(digests.size())));
  storage::Digest all;
  all.Str("chunked");
  all.Str(options);
  for (const int64_t d : digests) all.Int(d);
  return all.Hex();
}

}  // namespace tessel::orchestrator
