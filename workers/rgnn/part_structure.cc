#include "workers/rgnn/part_structure.h"

#include <algorithm>
#include <numeric>

#include "core/logging.h"

namespace tessel::workers {

int32_t NodeTypeOf(const std::vector<int64_t>& type_offsets, int64_t node) {
  if (type_offsets.size() < 2) return 0;
  const auto it = std::upper_bound(type_offsets.begin(), type_offsets.end(), node);
  return static_cast<int32_t>(it - type_offsets.begin()) - 1;
}

Result<PartStructure> PartStructure::FromPartition(const storage::WorkerPartition& p) {
  PartStructure s;
  s.worker = p.part;
  s.num_workers = p.num_parts;
  s.num_nodes = p.total_nodes;
  s.num_relations = p.num_relations();
  s.num_classes = p.num_classes;
  s.type_offsets = p.type_offsets;
  const auto owned = static_cast<size_t>(p.num_owned);
  // Owned rows in global id order (a range-book layout already has them so; any other is sorted here).
  std::vector<int64_t> order(owned), local_of_row(owned);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return p.row_orig_id[static_cast<size_t>(a)] < p.row_orig_id[static_cast<size_t>(b)];
  });
  s.owned.resize(owned);
  s.labels.resize(owned);
  s.train_mask.resize(owned);
  s.test_mask.resize(owned);
  for (size_t i = 0; i < owned; ++i) {
    const auto row = static_cast<size_t>(order[i]);
    local_of_row[row] = static_cast<int64_t>(i);
    s.owned[i] = p.row_orig_id[row];
    s.labels[i] = p.labels[row];
    s.train_mask[i] = p.train_mask[row];
    s.test_mask[i] = p.test_mask[row];
    if (i > 0 && s.owned[i] == s.owned[i - 1]) {
      return BadDataError(StrCat("part ", p.part, ": node ", s.owned[i], " is owned twice"));
    }
  }
  // Every source's owner, once per row.
  std::vector<int32_t> row_owner(static_cast<size_t>(p.num_rows()));
  for (size_t r = 0; r < row_owner.size(); ++r) {
    const storage::BookEntry e = storage::LookupRangeBook(p.offsets, p.row_new_id[r]);
    if (e.part < 0) return BadDataError(StrCat("part ", p.part, ": row ", r, " is outside the range book"));
    row_owner[r] = e.part;
  }
  // In-edges by destination, relations in order (the partition's edges are grouped by relation), then
  // the sources of each (node, relation) sorted by global id, as SampledGraph::FromGraph sorts them.
  const size_t E = p.src.size();
  s.in_ptr.assign(owned + 1, 0);
  for (size_t e = 0; e < E; ++e) ++s.in_ptr[static_cast<size_t>(local_of_row[static_cast<size_t>(p.dst[e])]) + 1];
  for (size_t i = 0; i < owned; ++i) s.in_ptr[i + 1] += s.in_ptr[i];
  s.in_src.resize(E);
  s.in_rel.resize(E);
  s.in_owner.resize(E);
  std::vector<int64_t> cursor(s.in_ptr.begin(), s.in_ptr.end() - 1);
  for (int32_t r = 0; r < s.num_relations; ++r) {
    for (int64_t e = p.rel_ptr[static_cast<size_t>(r)]; e < p.rel_ptr[static_cast<size_t>(r) + 1]; ++e) {
      const auto local = static_cast<size_t>(local_of_row[static_cast<size_t>(p.dst[static_cast<size_t>(e)])]);
      const auto at = static_cast<size_t>(cursor[local]++);
      const auto src = static_cast<size_t>(p.src[static_cast<size_t>(e)]);
      s.in_src[at] = p.row_orig_id[src];
      s.in_rel[at] = r;
      s.in_owner[at] = row_owner[src];
    }
  }
  std::vector<std::pair<int64_t, int32_t>> run;
  for (size_t v = 0; v < owned; ++v) {
    for (int64_t b = s.in_ptr[v]; b < s.in_ptr[v + 1];) {
      int64_t e = b;
      while (e < s.in_ptr[v + 1] && s.in_rel[static_cast<size_t>(e)] == s.in_rel[static_cast<size_t>(b)]) ++e;
      run.clear();
      for (int64_t i = b; i < e; ++i)
        run.emplace_back(s.in_src[static_cast<size_t>(i)], s.in_owner[static_cast<size_t>(i)]);
      std::sort(run.begin(), run.end());
      for (int64_t i = b; i < e; ++i) {
        s.in_src[static_cast<size_t>(i)] = run[static_cast<size_t>(i - b)].first;
        s.in_owner[static_cast<size_t>(i)] = run[static_cast<size_t>(i - b)].second;
      }
      b = e;
    }
  }
  return s;
}

int64_t PartStructure::LocalOf(int64_t node) const {
  const auto it = std::lower_bound(owned.begin(), owned.end(), node);
  return it != owned.end() && *it == node ? static_cast<int64_t>(it - owned.begin()) : -1;
}

int64_t PartStructure::Bytes() const {
  auto bytes_of = [](const auto& v) { return static_cast<int64_t>(v.size() * sizeof(v[0])); };
  return bytes_of(type_offsets) + bytes_of(owned) + bytes_of(in_ptr) + bytes_of(in_src) + bytes_of(in_rel) +
         bytes_of(in_owner) + bytes_of(labels) + bytes_of(train_mask) + bytes_of(test_mask);
}

}  // namespace tessel::workers
