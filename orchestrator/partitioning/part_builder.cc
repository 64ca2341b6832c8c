#include "orchestrator/partitioning/part_builder.h"

#include <algorithm>
#include <numeric>
#include <tuple>
#include <utility>

#include "core/logging.h"
#include "storage/feature_check.h"

namespace tessel::orchestrator {
namespace {

using storage::WorkerPartition;

// A node as its part's builder receives it.
struct NodeOut {
  int64_t new_id = 0, orig_id = 0, label = -1;
  uint8_t train = 0, val = 0, test = 0, pad[5] = {};
};

template <typename T>
void Free(T& v) {
  T().swap(v);
}

// The order that groups `n` items by their rank in `rank_of`, and the counts per rank.
std::vector<size_t> GroupByRank(const std::vector<int>& rank_of, int ranks, std::vector<int64_t>* counts) {
  counts->assign(static_cast<size_t>(ranks), 0);
  for (const int r : rank_of) ++(*counts)[static_cast<size_t>(r)];
  std::vector<int64_t> at(static_cast<size_t>(ranks), 0);
  for (int r = 1; r < ranks; ++r)
    at[static_cast<size_t>(r)] = at[static_cast<size_t>(r) - 1] + (*counts)[static_cast<size_t>(r) - 1];
  std::vector<size_t> order(rank_of.size());
  for (size_t i = 0; i < rank_of.size(); ++i) order[static_cast<size_t>(at[static_cast<size_t>(rank_of[i])]++)] = i;
  return order;
}

}  // namespace

Result<std::vector<WorkerPartition>> BuildOwnedParts(const RankGroup& group, const Layout& layout, const Home& home,
                                                     std::vector<Edge> in_edges, const std::vector<Placed>& placed,
                                                     const PartFacts& facts) {
  const int ranks = group.size(), me = group.rank();
  const int32_t k = facts.parts;
  const auto part_of_new = [&](int64_t id) { return storage::LookupRangeBook(facts.offsets, id).part; };

  // 1. In-edges in new ids, in place, then sorted by builder and sent.
  {
    std::vector<int64_t> sources;
    sources.reserve(in_edges.size());
    for (const Edge& e : in_edges) sources.push_back(e.src);
    std::sort(sources.begin(), sources.end());
    sources.erase(std::unique(sources.begin(), sources.end()), sources.end());
    TESSEL_ASSIGN_OR_RETURN(const std::vector<Placed> source_at, Resolve(group, layout, home.lo, placed, sources));
    for (Edge& e : in_edges) {
      const Placed& d = placed[static_cast<size_t>(e.dst() - home.lo)];
      e.src = source_at[static_cast<size_t>(std::lower_bound(sources.begin(), sources.end(), e.src) - sources.begin())]
                  .new_id;
      e.set_dst(d.new_id);
    }
  }
  const auto owner_of = [&](const Edge& e) { return OwnerOfPart(part_of_new(e.dst()), ranks); };
  std::sort(in_edges.begin(), in_edges.end(), [&](const Edge& a, const Edge& b) {
    const int oa = owner_of(a), ob = owner_of(b);
    return oa != ob ? oa < ob : a.dst() < b.dst();
  });
  std::vector<int64_t> counts(static_cast<size_t>(ranks), 0);
  for (const Edge& e : in_edges) ++counts[static_cast<size_t>(owner_of(e))];
  TESSEL_ASSIGN_OR_RETURN(std::vector<Edge> edges, group.Exchange(in_edges, counts));
  Free(in_edges);
  // Grouped by part: parts are ranges of new ids.
  std::sort(edges.begin(), edges.end(), [](const Edge& a, const Edge& b) { return a.dst() < b.dst(); });

  // 2. The nodes, with their supervision, to their builders (their features follow, StreamOwnedFeatures).
  std::vector<NodeOut> nodes;
  {
    std::vector<int> owner(static_cast<size_t>(home.size()));
    for (size_t i = 0; i < owner.size(); ++i) owner[i] = OwnerOfPart(placed[i].part, ranks);
    const std::vector<size_t> order = GroupByRank(owner, ranks, &counts);
    std::vector<NodeOut> send(order.size());
    for (size_t j = 0; j < order.size(); ++j) {
      const size_t i = order[j];
      send[j] = {placed[i].new_id,
                 home.lo + static_cast<int64_t>(i),
                 home.labels[i],
                 home.train[i],
                 home.val[i],
                 home.test[i],
                 {}};
    }
    TESSEL_ASSIGN_OR_RETURN(nodes, group.Exchange(send, counts));
  }
  // Each owned node's index in `nodes`, by new id.
  std::vector<size_t> by_new(nodes.size());
  std::iota(by_new.begin(), by_new.end(), size_t{0});
  std::sort(by_new.begin(), by_new.end(), [&](size_t a, size_t b) { return nodes[a].new_id < nodes[b].new_id; });
  std::vector<int64_t> owned_ids(nodes.size());
  for (size_t j = 0; j < by_new.size(); ++j) owned_ids[j] = nodes[by_new[j]].new_id;
  const auto node_index = [&](int64_t id) {
    return by_new[static_cast<size_t>(std::lower_bound(owned_ids.begin(), owned_ids.end(), id) - owned_ids.begin())];
  };

  // 3. Each owned part's halo and its edges in rows (in place, grouped by relation, sorted by (source row,
  // destination row)), before any feature row is made: the received edges go first.
  std::vector<int32_t> owned;
  for (int32_t p = me; p < k; p += ranks) owned.push_back(p);
  std::vector<WorkerPartition> out(owned.size());
  std::vector<std::vector<int64_t>> halos(owned.size());
  const auto num_rel = static_cast<int32_t>(facts.relation_names.size());
  for (size_t j = 0; j < owned.size(); ++j) {
    WorkerPartition& wp = out[j];
    wp.part = owned[j];
    const int64_t lo = facts.offsets[static_cast<size_t>(wp.part)],
                  hi = facts.offsets[static_cast<size_t>(wp.part) + 1];
    wp.num_owned = hi - lo;
    const auto b =
        std::lower_bound(edges.begin(), edges.end(), lo, [](const Edge& e, int64_t v) { return e.dst() < v; });
    const auto e = std::lower_bound(b, edges.end(), hi, [](const Edge& x, int64_t v) { return x.dst() < v; });
    std::vector<int64_t>& halo = halos[j];
    for (auto it = b; it != e; ++it) {
      if (it->src < lo || it->src >= hi) halo.push_back(it->src);
    }
    std::sort(halo.begin(), halo.end());
    halo.erase(std::unique(halo.begin(), halo.end()), halo.end());
    halo.shrink_to_fit();
    for (auto it = b; it != e; ++it) {
      it->src = (it->src >= lo && it->src < hi)
                    ? it->src - lo
                    : wp.num_owned + (std::lower_bound(halo.begin(), halo.end(), it->src) - halo.begin());
      it->set_dst(it->dst() - lo);
    }
    std::sort(b, e, [](const Edge& x, const Edge& y) {
      const int32_t xr = x.rel(), yr = y.rel();
      return xr != yr ? xr < yr : x.src != y.src ? x.src < y.src : x.dst() < y.dst();
    });
    wp.relation_names = facts.relation_names;
    wp.rel_ptr.assign(static_cast<size_t>(num_rel) + 1, 0);
    wp.src.resize(static_cast<size_t>(e - b));
    wp.dst.resize(static_cast<size_t>(e - b));
    for (auto it = b; it != e; ++it) {
      const auto at = static_cast<size_t>(it - b);
      ++wp.rel_ptr[static_cast<size_t>(it->rel()) + 1];
      wp.src[at] = it->src;
      wp.dst[at] = it->dst();
    }
    for (int32_t r = 0; r < num_rel; ++r) wp.rel_ptr[static_cast<size_t>(r) + 1] += wp.rel_ptr[static_cast<size_t>(r)];
  }
  Free(edges);

  // 4. The owned rows of every part, from the nodes this rank received; the halo rows are made room for.
  for (size_t j = 0; j < owned.size(); ++j) {
    WorkerPartition& wp = out[j];
    wp.num_parts = k;
    wp.offsets = facts.offsets;
    const int64_t lo = facts.offsets[static_cast<size_t>(wp.part)];
    const std::vector<int64_t>& halo = halos[j];
    const int64_t rows = wp.num_owned + static_cast<int64_t>(halo.size());
    wp.row_new_id.resize(static_cast<size_t>(rows));
    std::iota(wp.row_new_id.begin(), wp.row_new_id.begin() + wp.num_owned, lo);
    std::copy(halo.begin(), halo.end(), wp.row_new_id.begin() + wp.num_owned);
    wp.row_orig_id.resize(static_cast<size_t>(rows));
    wp.feature_dim = home.feature_dim;  // the rows come later, straight to the part's file
    const auto owned_rows = static_cast<size_t>(wp.num_owned);
    wp.labels.resize(owned_rows);
    wp.train_mask.resize(owned_rows);
    wp.val_mask.resize(owned_rows);
    wp.test_mask.resize(owned_rows);
    for (size_t i = 0; i < owned_rows; ++i) {
      const size_t at = node_index(lo + static_cast<int64_t>(i));
      const NodeOut& nd = nodes[at];
      wp.row_orig_id[i] = nd.orig_id;
      wp.labels[i] = nd.label;
      wp.train_mask[i] = nd.train;
      wp.val_mask[i] = nd.val;
      wp.test_mask[i] = nd.test;
    }
    wp.type_offsets = facts.type_offsets;
    wp.total_nodes = facts.total_nodes;
    wp.num_classes = facts.num_classes;
    wp.total_train = facts.total_train;
    wp.total_test = facts.total_test;
    wp.graph_hash = facts.graph_hash;
  }

  // 5. The halo rows' original ids, asked of the halo nodes' builders. The answers are made and this
  // rank's nodes freed before they travel.
  std::vector<int64_t> asked_ids;
  for (const std::vector<int64_t>& halo : halos) asked_ids.insert(asked_ids.end(), halo.begin(), halo.end());
  std::sort(asked_ids.begin(), asked_ids.end());
  asked_ids.erase(std::unique(asked_ids.begin(), asked_ids.end()), asked_ids.end());
  std::vector<int> asked_of(asked_ids.size());
  for (size_t i = 0; i < asked_ids.size(); ++i) asked_of[i] = OwnerOfPart(part_of_new(asked_ids[i]), ranks);
  const std::vector<size_t> ask_order = GroupByRank(asked_of, ranks, &counts);
  Free(asked_of);
  std::vector<int64_t> from;
  std::vector<int64_t> wanted;
  {
    std::vector<int64_t> ask(ask_order.size());
    for (size_t j = 0; j < ask_order.size(); ++j) ask[j] = asked_ids[ask_order[j]];
    TESSEL_ASSIGN_OR_RETURN(wanted, group.Exchange(ask, counts, &from));
  }
  std::vector<int64_t> orig_back(wanted.size());
  for (size_t i = 0; i < wanted.size(); ++i) orig_back[i] = nodes[node_index(wanted[i])].orig_id;
  Free(wanted);
  Free(nodes);
  Free(by_new);
  Free(owned_ids);
  std::vector<int64_t> answer_counts(static_cast<size_t>(ranks));
  for (int r = 0; r < ranks; ++r)
    answer_counts[static_cast<size_t>(r)] = from[static_cast<size_t>(r) + 1] - from[static_cast<size_t>(r)];
  TESSEL_ASSIGN_OR_RETURN(const std::vector<int64_t> halo_orig, group.Exchange(orig_back, answer_counts));
  Free(orig_back);
  // The answers come in ask order; index them by the id asked.
  std::vector<size_t> answer_of(asked_ids.size());
  for (size_t j = 0; j < ask_order.size(); ++j) answer_of[ask_order[j]] = j;
  for (size_t j = 0; j < owned.size(); ++j) {
    WorkerPartition& wp = out[j];
    const auto owned_rows = static_cast<size_t>(wp.num_owned);
    const std::vector<int64_t>& halo = halos[j];
    for (size_t h = 0; h < halo.size(); ++h) {
      wp.row_orig_id[owned_rows + h] = halo_orig[answer_of[static_cast<size_t>(
          std::lower_bound(asked_ids.begin(), asked_ids.end(), halo[h]) - asked_ids.begin())]];
    }
  }
  return out;
}

Status StreamOwnedFeatures(const RankGroup& group, const storage::ChunkedGraph& cg,
                           const storage::ChunkedImportOptions& o, const Layout& layout, const Home& home,
                           const std::vector<Placed>& placed, const std::vector<int64_t>& offsets,
                           std::vector<storage::PartitionFileWriter>& writers) {
  const int ranks = group.size(), me = group.rank();
  const auto dim = static_cast<size_t>(home.feature_dim);
  if (dim == 0) return Status::Ok();
  const int64_t slab = std::max<int64_t>(1, kFeatureSlabBytes / static_cast<int64_t>(dim * sizeof(float)));
  int64_t rounds = (home.size() + slab - 1) / slab;
  TESSEL_RETURN_IF_ERROR(group.Max(&rounds, 1));
  std::vector<int64_t> counts;
  std::vector<float> rows, send;
  std::vector<int64_t> ids;
  for (int64_t round = 0; round < rounds; ++round) {
    // This rank's slab [a, b) of its home, read type by type.
    const int64_t a = std::min(home.hi, home.lo + round * slab), b = std::min(home.hi, a + slab);
    rows.clear();
    Status st;
    for (size_t t = 0; t + 1 < layout.type_offsets.size() && st.ok(); ++t) {
      const int64_t off = layout.type_offsets[t], end = layout.type_offsets[t + 1];
      const int64_t x = std::clamp(a, off, end), y = std::clamp(b, off, end);
      if (x >= y) continue;
      Result<storage::ChunkedNodeRows> got =
          storage::ReadNodeRows(cg, o, static_cast<int32_t>(t), x - off, y - x, storage::NodeColumns::kFeatures);
      st = got.status();
      if (!st.ok()) break;
      const int64_t bad = storage::FirstNonFinite(got->features.data(), static_cast<int64_t>(got->features.size()));
      if (bad >= 0) {
        const int64_t local = x - off + bad / static_cast<int64_t>(dim);
        st = storage::NonFiniteFeatureError(
            StrCat(cg.metadata_path, ": node_data.", cg.node_types[t].name, ".", o.features), cg.node_types[t].name,
            local, off + local, bad % static_cast<int64_t>(dim), got->features[static_cast<size_t>(bad)]);
        break;
      }
      rows.insert(rows.end(), got->features.begin(), got->features.end());
    }
    TESSEL_RETURN_IF_ERROR(group.Agree(st));
    // To the builders, each row after its new id; a home's rows of one part have consecutive new ids.
    std::vector<int> owner(static_cast<size_t>(b - a));
    for (int64_t i = a; i < b; ++i)
      owner[static_cast<size_t>(i - a)] = OwnerOfPart(placed[static_cast<size_t>(i - home.lo)].part, ranks);
    const std::vector<size_t> order = GroupByRank(owner, ranks, &counts);
    ids.resize(order.size());
    send.resize(order.size() * dim);
    for (size_t j = 0; j < order.size(); ++j) {
      ids[j] = placed[static_cast<size_t>(a - home.lo) + order[j]].new_id;
      std::copy_n(rows.begin() + static_cast<ptrdiff_t>(order[j] * dim), dim,
                  send.begin() + static_cast<ptrdiff_t>(j * dim));
    }
    TESSEL_ASSIGN_OR_RETURN(const std::vector<int64_t> got_ids, group.Exchange(ids, counts));
    for (int64_t& c : counts) c *= static_cast<int64_t>(dim);
    TESSEL_ASSIGN_OR_RETURN(const std::vector<float> got, group.Exchange(send, counts));
    // Into the parts' files, a run of consecutive rows of one part at a time.
    for (size_t j = 0; j < got_ids.size() && st.ok();) {
      const storage::BookEntry at = storage::LookupRangeBook(offsets, got_ids[j]);
      if (at.part < 0 || OwnerOfPart(at.part, ranks) != me) {
        st = InternalError(StrCat("rank ", me, " was sent the features of new id ", got_ids[j], ", not of its parts"));
        break;
      }
      const int64_t part_end = offsets[static_cast<size_t>(at.part) + 1];
      size_t run = 1;
      while (j + run < got_ids.size() && got_ids[j + run] == got_ids[j] + static_cast<int64_t>(run) &&
             got_ids[j + run] < part_end) {
        ++run;
      }
      st = writers[static_cast<size_t>((at.part - me) / ranks)].WriteRows(at.local, got.data() + j * dim,
                                                                          static_cast<int64_t>(run));
      j += run;
    }
    TESSEL_RETURN_IF_ERROR(group.Agree(st));
  }
  return Status::Ok();
}

}  // namespace tessel::orchestrator
