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
    : graph_(&graph),
      type_offsets_(graph.type_offsets),
      num_relations_(graph.num_relations),
      fanouts_(std::move(fanouts)),
      per_(per),
      slot_(static_cast<size_t>(graph.num_nodes), -1) {}

Sampler::Sampler(const PartStructure& part, std::vector<int32_t> fanouts, FanoutPer per)
    : part_(&part),
      type_offsets_(part.type_offsets),
      num_relations_(part.num_relations),
      fanouts_(std::move(fanouts)),
      per_(per) {}

int32_t Sampler::SlotOf(int64_t node) const {
  if (graph_ != nullptr) return slot_[static_cast<size_t>(node)];
  const auto it = slot_map_.find(node);
  return it == slot_map_.end() ? -1 : it->second;
}

void Sampler::SetSlot(int64_t node, int32_t slot) {
  if (graph_ != nullptr) {
    slot_[static_cast<size_t>(node)] = slot;
  } else {
    slot_map_[node] = slot;
  }
}

void Sampler::ClearSlots(const std::vector<int64_t>& nodes) {
  if (graph_ == nullptr) {
    slot_map_.clear();
    return;
  }
  for (const int64_t id : nodes) slot_[static_cast<size_t>(id)] = -1;
}

void Sampler::Pick(const int32_t* rel, int64_t begin, int64_t end, int32_t fanout, uint64_t node_key,
                   std::vector<int64_t>* positions) {
  // Floyd's algorithm: `fanout` distinct positions of [b, e), in increasing order.
  const auto draw = [&](int64_t b, int64_t e, uint64_t stream) {
    const int64_t degree = e - b;
    if (fanout < 0 || degree <= fanout) {
      for (int64_t i = b; i < e; ++i) positions->push_back(i);
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
    for (const int64_t i : picked) positions->push_back(b + i);
  };
  if (per_ == FanoutPer::kTotal) {
    draw(begin, end, node_key);
    return;
  }
  for (int64_t b = begin; b < end;) {
    const int32_t r = rel[b];
    int64_t e = b;
    while (e < end && rel[e] == r) ++e;
    draw(b, e, MixKey(node_key, static_cast<uint64_t>(r)));
    b = e;
  }
}

void Sampler::DrawHeld(int64_t node, int32_t fanout, uint64_t layer_key, std::vector<Drawn>* out) {
  positions_.clear();
  if (graph_ != nullptr) {
    const auto v = static_cast<size_t>(node);
    Pick(graph_->in_rel.data(), graph_->in_ptr[v], graph_->in_ptr[v + 1], fanout,
         MixKey(layer_key, static_cast<uint64_t>(node)), &positions_);
    for (const int64_t i : positions_) {
      const auto e = static_cast<size_t>(i);
      const int32_t src = graph_->in_src[e];
      out->push_back({graph_->in_rel[e], graph_->part_of[static_cast<size_t>(src)], src});
    }
    return;
  }
  const auto v = static_cast<size_t>(node);  // the index among the owned nodes
  Pick(part_->in_rel.data(), part_->in_ptr[v], part_->in_ptr[v + 1], fanout,
       MixKey(layer_key, static_cast<uint64_t>(part_->owned[v])), &positions_);
  for (const int64_t i : positions_) {
    const auto e = static_cast<size_t>(i);
    out->push_back({part_->in_rel[e], part_->in_owner[e], part_->in_src[e]});
  }
}

Status Sampler::DrawLayer(const std::vector<int64_t>& dst, const std::vector<int32_t>& dst_owner, int32_t fanout,
                          uint64_t layer_key, WorkerComm* comm, std::vector<Drawn>* edges,
                          std::vector<int64_t>* edge_dst) {
  const auto close = [&](size_t i) { edge_dst->resize(edges->size(), static_cast<int64_t>(i)); };  // dst i's edges
  if (graph_ != nullptr) {
    for (size_t i = 0; i < dst.size(); ++i) {
      DrawHeld(dst[i], fanout, layer_key, edges);
      close(i);
    }
    return Status();
  }
  const int32_t me = part_->worker;
  const auto W = static_cast<size_t>(part_->num_workers);
  // A problem on this side is returned only after both exchanges, which every worker must finish.
  Status problem;
  const auto held = [&](int64_t node) {
    const int64_t local = part_->LocalOf(node);
    if (local < 0 && problem.ok()) {
      problem = BadDataError(StrCat("worker ", me, " was asked to sample the neighbours of node ", node,
                                    ", which it does not own (", part_->owned.size(), " owned nodes)"));
    }
    return local;
  };
  std::vector<std::vector<int64_t>> want(W), asked, reply(W), got;
  for (size_t i = 0; i < dst.size(); ++i) {
    if (dst_owner[i] != me) want[static_cast<size_t>(dst_owner[i])].push_back(dst[i]);
  }
  if (W > 1) TESSEL_RETURN_IF_ERROR(comm->AllToAll(want, &asked));
  // Answers: per asked node its count of draws, then (source, relation << 32 | owner) per draw.
  std::vector<Drawn> drawn;
  for (size_t q = 0; q < asked.size() && W > 1; ++q) {
    for (const int64_t node : asked[q]) {
      drawn.clear();
      if (const int64_t local = held(node); local >= 0) DrawHeld(local, fanout, layer_key, &drawn);
      reply[q].push_back(static_cast<int64_t>(drawn.size()));
      for (const Drawn& d : drawn) {
        reply[q].push_back(d.src);
        reply[q].push_back(static_cast<int64_t>((static_cast<uint64_t>(d.rel) << 32) | static_cast<uint32_t>(d.owner)));
      }
    }
  }
  if (W > 1) TESSEL_RETURN_IF_ERROR(comm->AllToAll(reply, &got));
  std::vector<size_t> cursor(W, 0);
  for (size_t i = 0; i < dst.size(); ++i) {
    const auto owner = static_cast<size_t>(dst_owner[i]);
    if (dst_owner[i] == me) {
      if (const int64_t local = held(dst[i]); local >= 0) DrawHeld(local, fanout, layer_key, edges);
    } else {
      const std::vector<int64_t>& from = got[owner];
      size_t& at = cursor[owner];
      const int64_t n = at < from.size() ? from[at] : -1;
      if (n < 0 || static_cast<uint64_t>(n) > (from.size() - at - 1) / 2) {
        return BadDataError(StrCat("worker ", me, ": worker ", owner, "'s answer for node ", dst[i], " is malformed"));
      }
      ++at;
      for (int64_t k = 0; k < n; ++k, at += 2) {
        const auto packed = static_cast<uint64_t>(from[at + 1]);
        const auto rel = static_cast<int32_t>(packed >> 32), src_owner = static_cast<int32_t>(packed & 0xffffffffU);
        if (rel < 0 || rel >= num_relations_ || src_owner < 0 || src_owner >= part_->num_workers || from[at] < 0 ||
            from[at] >= part_->num_nodes) {
          return BadDataError(
              StrCat("worker ", me, ": worker ", owner, " drew an edge out of range for node ", dst[i]));
        }
        edges->push_back({rel, src_owner, from[at]});
      }
    }
    close(i);
  }
  return problem;
}

std::vector<SampledBlock> Sampler::Sample(std::span<const int64_t> seeds, uint64_t key) {
  LocalComm local;
  Result<std::vector<SampledBlock>> blocks = Sample(seeds, key, local);
  return blocks.ok() ? std::move(blocks).value() : std::vector<SampledBlock>();
}

Result<std::vector<SampledBlock>> Sampler::Sample(std::span<const int64_t> seeds, uint64_t key, WorkerComm& comm) {
  const int L = static_cast<int>(fanouts_.size());
  std::vector<SampledBlock> blocks(static_cast<size_t>(L));
  std::vector<int64_t> dst(seeds.begin(), seeds.end());
  std::vector<int32_t> dst_owner(dst.size());
  for (size_t i = 0; i < dst.size(); ++i) {
    dst_owner[i] = graph_ != nullptr ? graph_->part_of[static_cast<size_t>(dst[i])] : part_->worker;
  }
  std::vector<Drawn> edges;  // per destination, flattened
  std::vector<int64_t> edge_dst;
  Status problem;
  for (int l = L - 1; l >= 0; --l) {
    SampledBlock& b = blocks[static_cast<size_t>(l)];
    b.num_dst = static_cast<int64_t>(dst.size());
    for (size_t i = 0; i < dst.size(); ++i) SetSlot(dst[i], static_cast<int32_t>(i));
    edges.clear();
    edge_dst.clear();
    const uint64_t layer_key = MixKey(key, static_cast<uint64_t>(l));
    Status drawn = DrawLayer(dst, dst_owner, fanouts_[static_cast<size_t>(l)], layer_key, &comm, &edges, &edge_dst);
    if (!drawn.ok()) {
      if (drawn.code() == Code::kRankFailed) return drawn;
      // Bad data: the layers below still run their exchanges (the peers wait in them), on what was drawn.
      if (problem.ok()) problem = drawn;
    }
    std::vector<int64_t> fresh;
    std::vector<int32_t> fresh_owner;
    for (const Drawn& e : edges) {
      if (SlotOf(e.src) < 0) {
        SetSlot(e.src, std::numeric_limits<int32_t>::max());  // seen; row assigned below
        fresh.push_back(e.src);
        fresh_owner.push_back(e.owner);
      }
    }
    // The new input rows follow the destinations grouped by node type (so types stay in few runs, one
    // typed GEMM each), in the order they were first drawn within a type: a stable counting sort by type.
    b.src_ids = dst;
    b.src_owner = dst_owner;
    b.src_ids.resize(dst.size() + fresh.size());
    b.src_owner.resize(b.src_ids.size());
    const size_t types = type_offsets_.size() > 1 ? type_offsets_.size() - 1 : 1;
    std::vector<size_t> start(types + 1, 0);
    std::vector<int32_t> type_of(fresh.size(), 0);
    for (size_t k = 0; k < fresh.size(); ++k) {
      if (types > 1) type_of[k] = NodeTypeOf(type_offsets_, fresh[k]);
      ++start[static_cast<size_t>(type_of[k]) + 1];
    }
    for (size_t t = 0; t < types; ++t) start[t + 1] += start[t];
    for (size_t k = 0; k < fresh.size(); ++k) {
      const size_t at = dst.size() + start[static_cast<size_t>(type_of[k])]++;
      b.src_ids[at] = fresh[k];
      b.src_owner[at] = fresh_owner[k];
    }
    for (size_t k = dst.size(); k < b.src_ids.size(); ++k) SetSlot(b.src_ids[k], static_cast<int32_t>(k));
    // Edges sorted by (relation, source row, destination row), as the layouts take them: they arrive in
    // destination order, so a stable counting sort by source row and then one by relation does it.
    const size_t E = edges.size();
    const size_t rows = b.src_ids.size();
    const auto R = static_cast<size_t>(num_relations_);
    std::vector<int64_t> src_row(E);
    for (size_t e = 0; e < E; ++e) src_row[e] = SlotOf(edges[e].src);
    std::vector<int64_t> row_start(rows + 1, 0);
    for (size_t e = 0; e < E; ++e) ++row_start[static_cast<size_t>(src_row[e]) + 1];
    for (size_t r = 0; r < rows; ++r) row_start[r + 1] += row_start[r];
    std::vector<size_t> by_src(E);
    for (size_t e = 0; e < E; ++e) by_src[static_cast<size_t>(row_start[static_cast<size_t>(src_row[e])]++)] = e;
    b.rel_ptr.assign(R + 1, 0);
    for (size_t e = 0; e < E; ++e) ++b.rel_ptr[static_cast<size_t>(edges[e].rel) + 1];
    for (size_t r = 0; r < R; ++r) b.rel_ptr[r + 1] += b.rel_ptr[r];
    std::vector<int64_t> cursor(b.rel_ptr.begin(), b.rel_ptr.end() - 1);
    b.src.resize(E);
    b.dst.resize(E);
    for (const size_t e : by_src) {
      const auto k = static_cast<size_t>(cursor[static_cast<size_t>(edges[e].rel)]++);
      b.src[k] = src_row[e];
      b.dst[k] = edge_dst[e];
    }
    ClearSlots(b.src_ids);
    dst = b.src_ids;
    dst_owner = b.src_owner;
  }
  if (!problem.ok()) return problem;
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
