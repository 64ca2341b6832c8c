#include "workers/rgnn/sampler.h"

#include <algorithm>
#include <limits>

namespace tessel::workers {

uint64_t MixKey(uint64_t a, uint64_t b) {
  uint64_t z = a + 0x9e3779b97f4a7c15ULL * (b + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

namespace {

// A uniform draw from [0, n) (n > 0) off a splitmix64 stream; the modulo bias is below 2^-40 for the
// degrees of real graphs.
uint64_t Below(uint64_t* state, uint64_t n) {
  *state += 0x9e3779b97f4a7c15ULL;
  return MixKey(*state, 0) % n;
}

}  // namespace

int64_t SampledGraph::Bytes() const {
  auto bytes_of = [](const auto& v) { return static_cast<int64_t>(v.size() * sizeof(v[0])); };
  return bytes_of(type_offsets) + bytes_of(in_ptr) + bytes_of(in_src) + bytes_of(in_rel) + bytes_of(part_of) +
         bytes_of(labels) + bytes_of(train_mask) + bytes_of(test_mask);
}

int32_t SampledGraph::TypeOf(int64_t node) const {
  if (type_offsets.size() < 2) return 0;
  const auto it = std::upper_bound(type_offsets.begin(), type_offsets.end(), node);
  return static_cast<int32_t>(it - type_offsets.begin()) - 1;
}

SampledGraph SampledGraph::FromGraph(const storage::HeteroGraph& graph, const std::vector<int32_t>& part_of) {
  SampledGraph g;
  g.num_nodes = graph.num_nodes();
  g.num_relations = static_cast<int32_t>(graph.relations.size());
  g.num_classes = graph.num_classes;
  g.type_offsets.push_back(0);
  for (size_t t = 0; t < graph.node_types.size(); ++t)
    g.type_offsets.push_back(g.type_offsets.back() + graph.node_types[t].count);
  const auto n = static_cast<size_t>(g.num_nodes);
  g.in_ptr.assign(n + 1, 0);
  for (const storage::Relation& r : graph.relations) {
    const int64_t dst_base = g.type_offsets[static_cast<size_t>(r.dst_type)];
    for (const int64_t d : r.dst) ++g.in_ptr[static_cast<size_t>(dst_base + d) + 1];
  }
  for (size_t v = 0; v < n; ++v) g.in_ptr[v + 1] += g.in_ptr[v];
  g.in_src.resize(static_cast<size_t>(g.in_ptr[n]));
  g.in_rel.resize(g.in_src.size());
  std::vector<int64_t> cursor(g.in_ptr.begin(), g.in_ptr.end() - 1);
  for (size_t ri = 0; ri < graph.relations.size(); ++ri) {
    const storage::Relation& r = graph.relations[ri];
    const int64_t src_base = g.type_offsets[static_cast<size_t>(r.src_type)];
    const int64_t dst_base = g.type_offsets[static_cast<size_t>(r.dst_type)];
    for (size_t e = 0; e < r.src.size(); ++e) {
      const auto at = static_cast<size_t>(cursor[static_cast<size_t>(dst_base + r.dst[e])]++);
      g.in_src[at] = static_cast<int32_t>(src_base + r.src[e]);
      g.in_rel[at] = static_cast<int32_t>(ri);
    }
  }
  // Relations arrive in order, so each node's edges are grouped by relation; sort the sources within.
  for (size_t v = 0; v < n; ++v) {
    for (int64_t b = g.in_ptr[v]; b < g.in_ptr[v + 1];) {
      int64_t e = b;
      while (e < g.in_ptr[v + 1] && g.in_rel[static_cast<size_t>(e)] == g.in_rel[static_cast<size_t>(b)]) ++e;
      std::sort(g.in_src.begin() + b, g.in_src.begin() + e);
      b = e;
    }
  }
  g.part_of = part_of;
  g.labels.assign(n, -1);
  g.train_mask.assign(n, 0);
  g.test_mask.assign(n, 0);
  for (size_t t = 0; t < graph.node_types.size(); ++t) {
    const storage::NodeType& nt = graph.node_types[t];
    const auto base = static_cast<size_t>(g.type_offsets[t]);
    for (size_t i = 0; i < static_cast<size_t>(nt.count); ++i) {
      if (!nt.labels.empty()) g.labels[base + i] = nt.labels[i];
      if (!nt.train_mask.empty()) g.train_mask[base + i] = nt.train_mask[i];
      if (!nt.test_mask.empty()) g.test_mask[base + i] = nt.test_mask[i];
    }
  }
  return g;
}

Status SampledGraph::Validate(int32_t num_workers) const {
  const auto n = static_cast<size_t>(num_nodes);
  if (num_nodes < 0 || num_nodes > std::numeric_limits<int32_t>::max()) {
    return BadDataError(StrCat("sampled graph: ", num_nodes, " nodes (at most 2^31 - 1)"));
  }
  if (in_ptr.size() != n + 1 || in_ptr.front() != 0 || in_ptr.back() != num_edges() || in_rel.size() != in_src.size()) {
    return BadDataError("sampled graph: in_ptr does not cover the edges");
  }
  if (part_of.size() != n || labels.size() != n || train_mask.size() != n || test_mask.size() != n) {
    return BadDataError("sampled graph: a per-node array does not cover the nodes");
  }
  if (type_offsets.size() < 2 || type_offsets.front() != 0 || type_offsets.back() != num_nodes) {
    return BadDataError("sampled graph: type offsets do not cover the nodes");
  }
  for (size_t v = 0; v < n; ++v) {
    if (in_ptr[v + 1] < in_ptr[v]) return BadDataError(StrCat("sampled graph: in_ptr decreases at node ", v));
    if (part_of[v] < 0 || part_of[v] >= num_workers) {
      return BadDataError(StrCat("sampled graph: node ", v, " belongs to worker ", part_of[v], " of ", num_workers));
    }
    if (labels[v] >= num_classes) {
      return BadDataError(StrCat("sampled graph: node ", v, " has label ", labels[v], " >= ", num_classes, " classes"));
    }
  }
  for (size_t e = 0; e < in_src.size(); ++e) {
    if (in_src[e] < 0 || in_src[e] >= num_nodes || in_rel[e] < 0 || in_rel[e] >= num_relations) {
      return BadDataError(StrCat("sampled graph: edge ", e, " (relation ", in_rel[e], ", source ", in_src[e],
                                 ") is outside ", num_relations, " relations and ", num_nodes, " nodes"));
    }
  }
  return Status();
}

void SampledGraph::Encode(ByteWriter& out) const {
  out.Put(num_nodes);
  out.Put(num_relations);
  out.Put(num_classes);
  out.PutVector(type_offsets);
  out.PutVector(in_ptr);
  out.PutVector(in_src);
  out.PutVector(in_rel);
  out.PutVector(part_of);
  out.PutVector(labels);
  out.PutVector(train_mask);
  out.PutVector(test_mask);
}

Result<SampledGraph> SampledGraph::Decode(ByteReader& in) {
  SampledGraph g;
  g.num_nodes = in.Get<int64_t>("nodes");
  g.num_relations = in.Get<int32_t>("relations");
  g.num_classes = in.Get<int64_t>("classes");
  g.type_offsets = in.GetVector<int64_t>("type offsets");
  g.in_ptr = in.GetVector<int64_t>("in_ptr");
  g.in_src = in.GetVector<int32_t>("in_src");
  g.in_rel = in.GetVector<int32_t>("in_rel");
  g.part_of = in.GetVector<int32_t>("part_of");
  g.labels = in.GetVector<int64_t>("labels");
  g.train_mask = in.GetVector<uint8_t>("train mask");
  g.test_mask = in.GetVector<uint8_t>("test mask");
  if (!in.ok()) return BadDataError(StrCat("sampled graph: ", in.error()));
  return g;
}

Sampler::Sampler(const SampledGraph& graph, std::vector<int32_t> fanouts, FanoutPer per)
    : graph_(graph), fanouts_(std::move(fanouts)), per_(per), slot_(static_cast<size_t>(graph.num_nodes), -1) {}

void Sampler::Draw(int64_t node, int32_t fanout, uint64_t key, std::vector<std::pair<int32_t, int32_t>>* out) {
  const int64_t begin = graph_.in_ptr[static_cast<size_t>(node)], end = graph_.in_ptr[static_cast<size_t>(node) + 1];
  // Floyd's algorithm: `fanout` distinct positions of [b, e), in increasing order.
  const auto draw = [&](int64_t b, int64_t e, uint64_t stream) {
    const int64_t degree = e - b;
    if (fanout < 0 || degree <= fanout) {
      for (int64_t i = b; i < e; ++i) {
        out->emplace_back(graph_.in_rel[static_cast<size_t>(i)], graph_.in_src[static_cast<size_t>(i)]);
      }
      return;
    }
    uint64_t state = stream;
    std::vector<int64_t>& picked = picked_;
    picked.clear();
    for (int64_t j = degree - fanout; j < degree; ++j) {
      const auto t = static_cast<int64_t>(Below(&state, static_cast<uint64_t>(j + 1)));
      picked.push_back(std::find(picked.begin(), picked.end(), t) == picked.end() ? t : j);
    }
    std::sort(picked.begin(), picked.end());
    for (const int64_t i : picked) {
      out->emplace_back(graph_.in_rel[static_cast<size_t>(b + i)], graph_.in_src[static_cast<size_t>(b + i)]);
    }
  };
  const uint64_t node_key = MixKey(key, static_cast<uint64_t>(node));
  if (per_ == FanoutPer::kTotal) {
    draw(begin, end, node_key);
    return;
  }
  for (int64_t b = begin; b < end;) {
    const int32_t rel = graph_.in_rel[static_cast<size_t>(b)];
    int64_t e = b;
    while (e < end && graph_.in_rel[static_cast<size_t>(e)] == rel) ++e;
    draw(b, e, MixKey(node_key, static_cast<uint64_t>(rel)));
    b = e;
  }
}

std::vector<SampledBlock> Sampler::Sample(std::span<const int64_t> seeds, uint64_t key) {
  const int L = static_cast<int>(fanouts_.size());
  std::vector<SampledBlock> blocks(static_cast<size_t>(L));
  std::vector<int64_t> dst(seeds.begin(), seeds.end());
  std::vector<std::pair<int32_t, int32_t>> edges;  // (relation, source node) per destination, flattened
  std::vector<int64_t> edge_dst;
  for (int l = L - 1; l >= 0; --l) {
    SampledBlock& b = blocks[static_cast<size_t>(l)];
    b.num_dst = static_cast<int64_t>(dst.size());
    for (size_t i = 0; i < dst.size(); ++i) slot_[static_cast<size_t>(dst[i])] = static_cast<int32_t>(i);
    edges.clear();
    edge_dst.clear();
    const uint64_t layer_key = MixKey(key, static_cast<uint64_t>(l));
    std::vector<int64_t> fresh;
    for (size_t i = 0; i < dst.size(); ++i) {
      const size_t first = edges.size();
      Draw(dst[i], fanouts_[static_cast<size_t>(l)], layer_key, &edges);
      for (size_t e = first; e < edges.size(); ++e) {
        const int32_t src = edges[e].second;
        if (slot_[static_cast<size_t>(src)] < 0) {
          slot_[static_cast<size_t>(src)] = std::numeric_limits<int32_t>::max();  // seen; row assigned below
          fresh.push_back(src);
        }
      }
      edge_dst.resize(edges.size(), static_cast<int64_t>(i));
    }
    // The new input rows follow the destinations grouped by node type (so types stay in few runs, one
    // typed GEMM each), in the order they were first drawn within a type: a stable counting sort by type.
    b.src_ids = dst;
    b.src_ids.reserve(dst.size() + fresh.size());
    const size_t types = graph_.type_offsets.size() > 1 ? graph_.type_offsets.size() - 1 : 1;
    if (types == 1) {
      b.src_ids.insert(b.src_ids.end(), fresh.begin(), fresh.end());
    } else {
      std::vector<size_t> start(types + 1, 0);
      std::vector<int32_t> type_of(fresh.size());
      for (size_t k = 0; k < fresh.size(); ++k) {
        type_of[k] = graph_.TypeOf(fresh[k]);
        ++start[static_cast<size_t>(type_of[k]) + 1];
      }
      for (size_t t = 0; t < types; ++t) start[t + 1] += start[t];
      b.src_ids.resize(dst.size() + fresh.size());
      for (size_t k = 0; k < fresh.size(); ++k) {
        b.src_ids[dst.size() + start[static_cast<size_t>(type_of[k])]++] = fresh[k];
      }
    }
    fresh.assign(b.src_ids.begin() + static_cast<std::ptrdiff_t>(dst.size()), b.src_ids.end());
    for (size_t k = 0; k < fresh.size(); ++k) {
      slot_[static_cast<size_t>(fresh[k])] = static_cast<int32_t>(dst.size() + k);
    }
    // Edges sorted by (relation, source row, destination row), as the layouts take them: they arrive in
    // destination order, so a stable counting sort by source row and then one by relation does it.
    const size_t E = edges.size();
    const size_t rows = b.src_ids.size();
    const auto R = static_cast<size_t>(graph_.num_relations);
    std::vector<int64_t> src_row(E);
    for (size_t e = 0; e < E; ++e) src_row[e] = slot_[static_cast<size_t>(edges[e].second)];
    std::vector<int64_t> start(rows + 1, 0);
    for (size_t e = 0; e < E; ++e) ++start[static_cast<size_t>(src_row[e]) + 1];
    for (size_t r = 0; r < rows; ++r) start[r + 1] += start[r];
    std::vector<size_t> by_src(E);
    for (size_t e = 0; e < E; ++e) by_src[static_cast<size_t>(start[static_cast<size_t>(src_row[e])]++)] = e;
    b.rel_ptr.assign(R + 1, 0);
    for (size_t e = 0; e < E; ++e) ++b.rel_ptr[static_cast<size_t>(edges[e].first) + 1];
    for (size_t r = 0; r < R; ++r) b.rel_ptr[r + 1] += b.rel_ptr[r];
    std::vector<int64_t> cursor(b.rel_ptr.begin(), b.rel_ptr.end() - 1);
    b.src.resize(E);
    b.dst.resize(E);
    for (const size_t e : by_src) {
      const auto k = static_cast<size_t>(cursor[static_cast<size_t>(edges[e].first)]++);
      b.src[k] = src_row[e];
      b.dst[k] = edge_dst[e];
    }
    for (const int64_t id : b.src_ids) slot_[static_cast<size_t>(id)] = -1;
    dst = b.src_ids;
  }
  return blocks;
}

void Shuffle(std::vector<int64_t>& items, uint64_t key) {
  uint64_t state = key;
  for (size_t i = items.size(); i > 1; --i) {
    const auto j = static_cast<size_t>(Below(&state, i));
    std::swap(items[i - 1], items[j]);
  }
}

}  // namespace tessel::workers
