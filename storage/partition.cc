// BuildWorkerPartitions, ValidatePartition and the byte encoding of a WorkerPartition.
#include "storage/partition.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <numeric>
#include <type_traits>
#include <utility>

#include "core/byte_io.h"
#include "core/logging.h"

namespace tessel::storage {
namespace {

static_assert(std::endian::native == std::endian::little, "the partition encoding is little-endian");

constexpr char kMagic[8] = {'T', 'S', 'L', 'P', 'A', 'R', 'T', '1'};
constexpr uint32_t kEncodingVersion = 3;  // 2: type_offsets; 3: graph_hash

// Where each global id's node type starts, for mapping a global id back to (type, local id).
struct TypeIndex {
  std::vector<int64_t> starts;  // [num_types + 1]
  explicit TypeIndex(const HeteroGraph& g) {
    starts.push_back(0);
    for (const NodeType& t : g.node_types) starts.push_back(starts.back() + t.count);
  }
  std::pair<int32_t, int64_t> Locate(int64_t global) const {
    const auto it = std::upper_bound(starts.begin(), starts.end(), global);
    const int32_t t = static_cast<int32_t>(it - starts.begin()) - 1;
    return {t, global - starts[t]};
  }
};

// The common feature width, or 0 when any type lacks features or the widths disagree.
int64_t CommonFeatureDim(const HeteroGraph& g) {
  if (g.node_types.empty()) return 0;
  const int64_t d = g.node_types[0].feature_dim;
  for (const NodeType& t : g.node_types) {
    if (t.feature_dim != d || static_cast<int64_t>(t.features.size()) != t.count * d) return 0;
  }
  return d;
}

// An edge bucketed to the part that owns its destination.
struct PendingEdge {
  int64_t src_new;  // new id of the source
  int64_t dst_row;  // row of the destination in its owner (< num_owned)
};

}  // namespace

BookEntry LookupRangeBook(const std::vector<int64_t>& offsets, int64_t new_id) {
  if (offsets.size() < 2 || new_id < offsets.front() || new_id >= offsets.back()) return {};
  // The last offset <= new_id; empty parts share their offset with the next part, and upper_bound
  // skips past all of them to the part that actually holds new_id.
  const auto it = std::upper_bound(offsets.begin(), offsets.end(), new_id) - 1;
  return {static_cast<int32_t>(it - offsets.begin()), new_id - *it};
}

Result<std::vector<WorkerPartition>> BuildWorkerPartitions(const HeteroGraph& graph,
                                                           const std::vector<int32_t>& part_of, int32_t num_parts) {
  const int64_t n = graph.num_nodes();
  if (num_parts < 1) return UsageError(StrCat("BuildWorkerPartitions: num_parts must be >= 1, got ", num_parts));
  if (static_cast<int64_t>(part_of.size()) != n) {
    return UsageError(StrCat("BuildWorkerPartitions: part assignment has ", part_of.size(), " entries, graph '",
                             graph.name, "' has ", n, " nodes"));
  }
  for (int64_t g = 0; g < n; ++g) {
    if (part_of[g] < 0 || part_of[g] >= num_parts) {
      return UsageError(
          StrCat("BuildWorkerPartitions: node ", g, " assigned to part ", part_of[g], ", not in [0, ", num_parts, ")"));
    }
  }
  const int32_t num_rel = static_cast<int32_t>(graph.relations.size());
  std::vector<int64_t> node_offset(graph.node_types.size());
  for (size_t t = 0; t < graph.node_types.size(); ++t) node_offset[t] = graph.NodeOffset(static_cast<int32_t>(t));
  for (int32_t r = 0; r < num_rel; ++r) {
    const Relation& rel = graph.relations[r];
    const int32_t types = static_cast<int32_t>(graph.node_types.size());
    if (rel.src_type < 0 || rel.src_type >= types || rel.dst_type < 0 || rel.dst_type >= types ||
        rel.src.size() != rel.dst.size()) {
      return BadDataError(StrCat("relation '", rel.name, "' is inconsistent (run Validate)"));
    }
    const int64_t sc = graph.node_types[rel.src_type].count, dc = graph.node_types[rel.dst_type].count;
    for (size_t e = 0; e < rel.src.size(); ++e) {
      if (rel.src[e] < 0 || rel.src[e] >= sc || rel.dst[e] < 0 || rel.dst[e] >= dc) {
        return BadDataError(StrCat("relation '", rel.name, "' edge ", e, " has an id out of range"));
      }
    }
  }

  // New ids: a stable counting sort of the global ids by part.
  std::vector<int64_t> offsets(num_parts + 1, 0);
  for (int32_t p : part_of) ++offsets[p + 1];
  for (int32_t p = 0; p < num_parts; ++p) offsets[p + 1] += offsets[p];
  std::vector<int64_t> new_id(n), orig_of_new(n);
  {
    std::vector<int64_t> cursor(offsets.begin(), offsets.end() - 1);
    for (int64_t g = 0; g < n; ++g) {
      const int64_t id = cursor[part_of[g]]++;
      new_id[g] = id;
      orig_of_new[id] = g;
    }
  }

  // Bucket every edge by the part of its destination, keeping relation order: a counting sort over
  // (part, relation) so each part's edges come out grouped by relation.
  std::vector<int64_t> bucket(static_cast<size_t>(num_parts) * num_rel + 1, 0);
  for (int32_t r = 0; r < num_rel; ++r) {
    const Relation& rel = graph.relations[r];
    const int64_t d_off = node_offset[rel.dst_type];
    for (int64_t d : rel.dst) ++bucket[static_cast<size_t>(part_of[d_off + d]) * num_rel + r + 1];
  }
  for (size_t i = 1; i < bucket.size(); ++i) bucket[i] += bucket[i - 1];
  std::vector<PendingEdge> pending(bucket.back());
  {
    std::vector<int64_t> cursor(bucket.begin(), bucket.end() - 1);
    for (int32_t r = 0; r < num_rel; ++r) {
      const Relation& rel = graph.relations[r];
      const int64_t s_off = node_offset[rel.src_type], d_off = node_offset[rel.dst_type];
      for (size_t e = 0; e < rel.src.size(); ++e) {
        const int64_t d = d_off + rel.dst[e];
        const int32_t p = part_of[d];
        pending[cursor[static_cast<size_t>(p) * num_rel + r]++] = {new_id[s_off + rel.src[e]], new_id[d] - offsets[p]};
      }
    }
  }

  const TypeIndex types(graph);
  const int64_t feature_dim = CommonFeatureDim(graph);
  std::vector<std::string> relation_names;
  for (const Relation& rel : graph.relations) relation_names.push_back(rel.name);
  int64_t total_train = 0, total_test = 0;
  for (const NodeType& t : graph.node_types) {
    if (t.labels.empty()) continue;
    for (int64_t i = 0; i < t.count; ++i) {
      if (t.labels[i] < 0) continue;
      if (!t.train_mask.empty() && t.train_mask[i]) ++total_train;
      if (!t.test_mask.empty() && t.test_mask[i]) ++total_test;
    }
  }

  // Scratch: row of a halo node in the part being built, indexed by new id; reset after each part.
  std::vector<int64_t> halo_row(n, -1);
  std::vector<WorkerPartition> parts(num_parts);
  for (int32_t p = 0; p < num_parts; ++p) {
    WorkerPartition& wp = parts[p];
    wp.part = p;
    wp.num_parts = num_parts;
    wp.offsets = offsets;
    const int64_t lo = offsets[p], hi = offsets[p + 1];
    wp.num_owned = hi - lo;
    const int64_t e_lo = bucket[static_cast<size_t>(p) * num_rel], e_hi = bucket[static_cast<size_t>(p + 1) * num_rel];

    std::vector<int64_t> halo;
    for (int64_t e = e_lo; e < e_hi; ++e) {
      const int64_t s = pending[e].src_new;
      if ((s < lo || s >= hi) && halo_row[s] == -1) {
        halo_row[s] = 0;
        halo.push_back(s);
      }
    }
    std::sort(halo.begin(), halo.end());
    for (size_t i = 0; i < halo.size(); ++i) halo_row[halo[i]] = wp.num_owned + static_cast<int64_t>(i);

    const int64_t rows = wp.num_owned + static_cast<int64_t>(halo.size());
    wp.row_new_id.resize(rows);
    std::iota(wp.row_new_id.begin(), wp.row_new_id.begin() + wp.num_owned, lo);
    std::copy(halo.begin(), halo.end(), wp.row_new_id.begin() + wp.num_owned);
    wp.row_orig_id.resize(rows);
    for (int64_t i = 0; i < rows; ++i) wp.row_orig_id[i] = orig_of_new[wp.row_new_id[i]];

    wp.relation_names = relation_names;
    wp.rel_ptr.assign(num_rel + 1, 0);
    wp.src.resize(e_hi - e_lo);
    wp.dst.resize(e_hi - e_lo);
    std::vector<std::pair<int64_t, int64_t>> seg;
    for (int32_t r = 0; r < num_rel; ++r) {
      const int64_t b = bucket[static_cast<size_t>(p) * num_rel + r],
                    end = bucket[static_cast<size_t>(p) * num_rel + r + 1];
      seg.clear();
      seg.reserve(end - b);
      for (int64_t e = b; e < end; ++e) {
        const int64_t s = pending[e].src_new;
        seg.emplace_back((s >= lo && s < hi) ? s - lo : halo_row[s], pending[e].dst_row);
      }
      std::sort(seg.begin(), seg.end());
      for (size_t i = 0; i < seg.size(); ++i) {
        wp.src[b - e_lo + static_cast<int64_t>(i)] = seg[i].first;
        wp.dst[b - e_lo + static_cast<int64_t>(i)] = seg[i].second;
      }
      wp.rel_ptr[r + 1] = end - e_lo;
    }
    for (int64_t s : halo) halo_row[s] = -1;

    wp.feature_dim = feature_dim;
    if (feature_dim > 0) {
      wp.features.resize(static_cast<size_t>(wp.num_owned * feature_dim));
      for (int64_t i = 0; i < wp.num_owned; ++i) {
        const auto [t, local] = types.Locate(wp.row_orig_id[i]);
        const float* from = graph.node_types[t].features.data() + local * feature_dim;
        std::copy(from, from + feature_dim, wp.features.begin() + i * feature_dim);
      }
    }
    wp.labels.assign(wp.num_owned, -1);
    wp.train_mask.assign(wp.num_owned, 0);
    wp.val_mask.assign(wp.num_owned, 0);
    wp.test_mask.assign(wp.num_owned, 0);
    for (int64_t i = 0; i < wp.num_owned; ++i) {
      const auto [t, local] = types.Locate(wp.row_orig_id[i]);
      const NodeType& nt = graph.node_types[t];
      if (!nt.labels.empty()) wp.labels[i] = nt.labels[local];
      if (!nt.train_mask.empty()) wp.train_mask[i] = nt.train_mask[local] ? 1 : 0;
      if (!nt.val_mask.empty()) wp.val_mask[i] = nt.val_mask[local] ? 1 : 0;
      if (!nt.test_mask.empty()) wp.test_mask[i] = nt.test_mask[local] ? 1 : 0;
    }
    wp.total_nodes = n;
    wp.type_offsets.clear();
    for (int32_t t = 0; t <= static_cast<int32_t>(graph.node_types.size()); ++t) {
      wp.type_offsets.push_back(t < static_cast<int32_t>(graph.node_types.size()) ? graph.NodeOffset(t) : n);
    }
    wp.num_classes = graph.num_classes;
    wp.total_train = total_train;
    wp.total_test = total_test;
  }
  return parts;
}

Status ValidatePartition(const WorkerPartition& p, PartFeatures features) {
  auto bad = [&](const std::string& what) {
    return BadDataError(StrCat("partition ", p.part, " of ", p.num_parts, ": ", what));
  };
  if (p.num_parts < 1 || p.part < 0 || p.part >= p.num_parts) return bad("part index out of range");
  if (p.total_nodes < 0 || p.num_classes < 0 || p.total_train < 0 || p.total_test < 0) {
    return bad("negative whole-graph count");
  }
  if (p.offsets.size() != static_cast<size_t>(p.num_parts) + 1) return bad("offsets has the wrong length");
  if (p.offsets.front() != 0 || p.offsets.back() != p.total_nodes) return bad("offsets do not cover all nodes");
  if (p.type_offsets.size() < 2 || p.type_offsets.front() != 0 || p.type_offsets.back() != p.total_nodes ||
      !std::is_sorted(p.type_offsets.begin(), p.type_offsets.end())) {
    return bad("type_offsets do not cover the nodes in order");
  }
  for (int32_t i = 0; i < p.num_parts; ++i) {
    if (p.offsets[i + 1] < p.offsets[i]) return bad("offsets are not monotone");
  }
  const int64_t lo = p.offsets[p.part], hi = p.offsets[p.part + 1];
  if (p.num_owned != hi - lo) return bad("num_owned disagrees with offsets");
  const int64_t rows = p.num_rows();
  if (rows < p.num_owned || p.row_orig_id.size() != p.row_new_id.size()) return bad("row arrays are inconsistent");
  if (rows > p.total_nodes) return bad("more rows than nodes");
  for (int64_t i = 0; i < p.num_owned; ++i) {
    if (p.row_new_id[i] != lo + i) return bad(StrCat("owned row ", i, " has the wrong new id"));
  }
  for (int64_t i = p.num_owned; i < rows; ++i) {
    const int64_t id = p.row_new_id[i];
    if (id < 0 || id >= p.total_nodes || (id >= lo && id < hi)) return bad(StrCat("halo row ", i, " is out of range"));
    if (i > p.num_owned && id <= p.row_new_id[i - 1]) return bad("halo rows are not sorted by new id");
  }
  for (int64_t i = 0; i < rows; ++i) {
    if (p.row_orig_id[i] < 0 || p.row_orig_id[i] >= p.total_nodes)
      return bad(StrCat("row ", i, " original id out of range"));
  }
  if (p.rel_ptr.size() != p.relation_names.size() + 1) return bad("rel_ptr has the wrong length");
  if (p.src.size() != p.dst.size()) return bad("src and dst differ in length");
  if (p.rel_ptr.front() != 0 || p.rel_ptr.back() != static_cast<int64_t>(p.src.size())) {
    return bad("rel_ptr does not cover the edges");
  }
  for (size_t r = 0; r + 1 < p.rel_ptr.size(); ++r) {
    if (p.rel_ptr[r + 1] < p.rel_ptr[r]) return bad("rel_ptr is not monotone");
  }
  for (size_t r = 0; r + 1 < p.rel_ptr.size(); ++r) {
    for (int64_t e = p.rel_ptr[r]; e < p.rel_ptr[r + 1]; ++e) {
      if (p.src[e] < 0 || p.src[e] >= rows) return bad(StrCat("edge ", e, " src row out of range"));
      if (p.dst[e] < 0 || p.dst[e] >= p.num_owned) return bad(StrCat("edge ", e, " dst row out of range"));
      if (e > p.rel_ptr[r] && std::pair(p.src[e], p.dst[e]) < std::pair(p.src[e - 1], p.dst[e - 1])) {
        return bad(StrCat("edges of relation ", r, " are not sorted by (src, dst)"));
      }
    }
  }
  if (p.feature_dim < 0) return bad("negative feature_dim");
  const int64_t num_features = static_cast<int64_t>(p.features.size());
  const bool features_fit =
      p.feature_dim == 0 || features == PartFeatures::kToCome ? num_features == 0
      : p.num_owned == 0                                      ? num_features == 0
                         : p.feature_dim <= num_features / p.num_owned && num_features == p.num_owned * p.feature_dim;
  if (!features_fit) return bad("features size is not num_owned * feature_dim");
  const size_t owned = static_cast<size_t>(p.num_owned);
  if (p.labels.size() != owned || p.train_mask.size() != owned || p.val_mask.size() != owned ||
      p.test_mask.size() != owned) {
    return bad("labels/masks are not one per owned row");
  }
  for (size_t i = 0; i < owned; ++i) {
    if (p.labels[i] < -1 || (p.labels[i] >= 0 && p.labels[i] >= p.num_classes))
      return bad(StrCat("label of row ", i, " out of range"));
    if (p.train_mask[i] > 1 || p.val_mask[i] > 1 || p.test_mask[i] > 1)
      return bad(StrCat("mask of row ", i, " is not 0/1"));
  }
  return Status::Ok();
}

// ---- byte encoding ---------------------------------------------------------------------------------

std::vector<uint8_t> EncodePartition(const WorkerPartition& p) {
  ByteWriter enc;
  for (char c : kMagic) enc.Put<char>(c);
  enc.Put<uint32_t>(kEncodingVersion);
  enc.Put<int32_t>(p.part);
  enc.Put<int32_t>(p.num_parts);
  enc.Put<int64_t>(p.num_owned);
  enc.Put<int64_t>(p.feature_dim);
  enc.Put<int64_t>(p.total_nodes);
  enc.Put<int64_t>(p.num_classes);
  enc.Put<int64_t>(p.total_train);
  enc.Put<int64_t>(p.total_test);
  enc.PutString(p.graph_hash);
  enc.PutVector(p.offsets);
  enc.PutVector(p.type_offsets);
  enc.PutVector(p.row_new_id);
  enc.PutVector(p.row_orig_id);
  enc.Put<uint64_t>(p.relation_names.size());
  for (const std::string& name : p.relation_names) enc.PutString(name);
  enc.PutVector(p.rel_ptr);
  enc.PutVector(p.src);
  enc.PutVector(p.dst);
  enc.PutVector(p.features);
  enc.PutVector(p.labels);
  enc.PutVector(p.train_mask);
  enc.PutVector(p.val_mask);
  enc.PutVector(p.test_mask);
  return enc.Take();
}

Result<WorkerPartition> DecodePartition(const uint8_t* data, size_t size) {
  if (data == nullptr && size > 0) return BadDataError("partition bytes: null buffer");
  ByteReader dec(data, size);
  char magic[8];
  for (char& c : magic) c = dec.Get<char>("magic");
  if (dec.ok() && std::memcmp(magic, kMagic, sizeof(kMagic)) != 0) dec.Fail("not a Tessel partition (bad magic)");
  const uint32_t version = dec.Get<uint32_t>("version");
  if (dec.ok() && version != kEncodingVersion) {
    dec.Fail(StrCat("unsupported partition encoding version ", version, " (expected ", kEncodingVersion, ")"));
  }
  WorkerPartition p;
  p.part = dec.Get<int32_t>("part");
  p.num_parts = dec.Get<int32_t>("num_parts");
  p.num_owned = dec.Get<int64_t>("num_owned");
  p.feature_dim = dec.Get<int64_t>("feature_dim");
  p.total_nodes = dec.Get<int64_t>("total_nodes");
  p.num_classes = dec.Get<int64_t>("num_classes");
  p.total_train = dec.Get<int64_t>("total_train");
  p.total_test = dec.Get<int64_t>("total_test");
  p.graph_hash = dec.GetString("graph_hash");
  p.offsets = dec.GetVector<int64_t>("offsets");
  p.type_offsets = dec.GetVector<int64_t>("type_offsets");
  p.row_new_id = dec.GetVector<int64_t>("row_new_id");
  p.row_orig_id = dec.GetVector<int64_t>("row_orig_id");
  const uint64_t num_rel = dec.Get<uint64_t>("relation count");
  // Each name takes at least its 8-byte length, which bounds a corrupt count before any allocation.
  if (dec.ok() && num_rel > dec.remaining() / sizeof(uint64_t)) dec.Fail("relation count exceeds the input");
  for (uint64_t r = 0; dec.ok() && r < num_rel; ++r) p.relation_names.push_back(dec.GetString("relation name"));
  p.rel_ptr = dec.GetVector<int64_t>("rel_ptr");
  p.src = dec.GetVector<int64_t>("src");
  p.dst = dec.GetVector<int64_t>("dst");
  p.features = dec.GetVector<float>("features");
  p.labels = dec.GetVector<int64_t>("labels");
  p.train_mask = dec.GetVector<uint8_t>("train_mask");
  p.val_mask = dec.GetVector<uint8_t>("val_mask");
  p.test_mask = dec.GetVector<uint8_t>("test_mask");
  if (dec.ok() && dec.remaining() != 0) dec.Fail(StrCat(dec.remaining(), " trailing bytes"));
  if (!dec.ok()) return BadDataError(StrCat("partition bytes: ", dec.error()));
  TESSEL_RETURN_IF_ERROR(ValidatePartition(p).WithContext("partition bytes"));
  return p;
}

}  // namespace tessel::storage
