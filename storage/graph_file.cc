// HeteroGraph invariants, and the HDF5 graph file (DESIGN.md "Graph file"):
//   /meta                attrs name, format_version, node_types[], relation_names[], num_classes,
//                        source_fingerprint, optional class_names[]
//   /nodes/<type>/       count (scalar int64), optional features f32 [n,d] (contiguous, finite), labels i64 [n],
//                        train/val/test u8 [n]
//   /relations/<i>/      attrs name, src_type, dst_type (type names), kind; datasets src, dst (int64)
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <set>
#include <string>
#include <unordered_map>

#include "core/logging.h"
#include "core/safe_file.h"
#include "storage/feature_check.h"
#include "storage/graph.h"
#include "storage/hdf5_util.h"

namespace tessel::storage {
namespace {

constexpr size_t kCompressAbove = 64 * 1024;  // elements; smaller arrays stay contiguous
constexpr const char* kMaskNames[3] = {"train", "val", "test"};
constexpr hsize_t kFileAlignment = 64;

// ---- shared checks: `where` names the array ("g.h5: /relations/3/dst" or "relation 3 (x) dst") ----

Status CheckIds(const std::vector<int64_t>& ids, int64_t bound, std::string_view where) {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= bound) {
      return BadDataError(StrCat(where, ": id ", ids[i], " out of range [0, ", bound, ") at index ", i));
    }
  }
  return Status::Ok();
}

Status CheckLabels(const std::vector<int64_t>& labels, int64_t num_classes, std::string_view where) {
  for (size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] < -1 || labels[i] >= num_classes) {
      return BadDataError(StrCat(where, ": label ", labels[i], " out of range [-1, ", num_classes, ") at index ", i));
    }
  }
  return Status::Ok();
}

Status CheckMask(const std::vector<uint8_t>& mask, const std::vector<int64_t>& labels, std::string_view where) {
  for (size_t i = 0; i < mask.size(); ++i) {
    if (mask[i] > 1) {
      return BadDataError(StrCat(where, ": value ", int{mask[i]}, " is not 0 or 1 at index ", i));
    }
    if (mask[i] == 1 && (labels.empty() || labels[i] < 0)) {
      return BadDataError(StrCat(where, ": node ", i, " is in the split but has no label"));
    }
  }
  return Status::Ok();
}

Status CheckName(const std::string& name, std::string_view what) {
  if (name.empty() || name == "." || name.find('/') != std::string::npos) {
    return BadDataError(StrCat(what, " name '", name, "' is empty or contains '/'"));
  }
  return Status::Ok();
}

const std::vector<uint8_t>& Mask(const NodeType& t, int m) {
  return m == 0 ? t.train_mask : (m == 1 ? t.val_mask : t.test_mask);
}
std::vector<uint8_t>& Mask(NodeType& t, int m) { return m == 0 ? t.train_mask : (m == 1 ? t.val_mask : t.test_mask); }

// Removes a temporary file unless Commit() renamed it into place.
class TempFile {
 public:
  explicit TempFile(std::string final_path) : final_(std::move(final_path)), temp_(TemporaryPathFor(final_)) {}
  ~TempFile() {
    if (!committed_) std::remove(temp_.c_str());
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const std::string& path() const { return temp_; }
  Status Commit() {
    TESSEL_RETURN_IF_ERROR(CheckNotSymlink(final_));
    if (std::rename(temp_.c_str(), final_.c_str()) != 0) {
      return StorageError(StrCat(final_, ": cannot rename ", temp_, " into place: ", std::strerror(errno)));
    }
    committed_ = true;
    return Status::Ok();
  }

 private:
  std::string final_;
  std::string temp_;
  bool committed_ = false;
};

// ---- writing ----------------------------------------------------------------------------------

h5::Layout LayoutFor(size_t elements) {
  return elements > kCompressAbove ? h5::Layout::kChunkedDeflate : h5::Layout::kContiguous;
}

Result<h5::Group> CreateGroup(hid_t loc, const std::string& name, std::string_view where) {
  h5::PropList gcpl(H5Pcreate(H5P_GROUP_CREATE));
  H5Pset_link_creation_order(gcpl.get(), H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED);
  h5::Group g(H5Gcreate2(loc, name.c_str(), H5P_DEFAULT, gcpl.get(), H5P_DEFAULT));
  if (!g.valid()) return h5::WriteError(where, StrCat("cannot create group ", name));
  return g;
}

Status WriteMeta(const HeteroGraph& g, hid_t file, std::string_view fname) {
  const std::string where = StrCat(fname, ": /meta");
  TESSEL_ASSIGN_OR_RETURN(h5::Group meta, CreateGroup(file, "meta", where));
  std::vector<std::string> type_names, rel_names;
  for (const auto& t : g.node_types) type_names.push_back(t.name);
  for (const auto& r : g.relations) rel_names.push_back(r.name);
  TESSEL_RETURN_IF_ERROR(h5::WriteStringAttribute(meta.get(), "name", g.name, where));
  TESSEL_RETURN_IF_ERROR(h5::WriteInt64Attribute(meta.get(), "format_version", kGraphFormatVersion, where));
  TESSEL_RETURN_IF_ERROR(h5::WriteStringArrayAttribute(meta.get(), "node_types", type_names, where));
  TESSEL_RETURN_IF_ERROR(h5::WriteStringArrayAttribute(meta.get(), "relation_names", rel_names, where));
  TESSEL_RETURN_IF_ERROR(h5::WriteInt64Attribute(meta.get(), "num_classes", g.num_classes, where));
  TESSEL_RETURN_IF_ERROR(h5::WriteStringAttribute(meta.get(), "source_fingerprint", g.source_fingerprint, where));
  if (!g.class_names.empty()) {
    TESSEL_RETURN_IF_ERROR(h5::WriteStringArrayAttribute(meta.get(), "class_names", g.class_names, where));
  }
  return Status::Ok();
}

Status WriteNodeType(const NodeType& t, hid_t nodes, std::string_view fname) {
  const std::string where = StrCat(fname, ": /nodes/", t.name);
  TESSEL_ASSIGN_OR_RETURN(h5::Group grp, CreateGroup(nodes, t.name, where));
  TESSEL_RETURN_IF_ERROR(h5::WriteScalar<int64_t>(grp.get(), "count", t.count, where));
  const hsize_t n = static_cast<hsize_t>(t.count);
  if (t.feature_dim > 0) {
    TESSEL_RETURN_IF_ERROR(h5::WriteArray<float>(grp.get(), "features", t.features.data(),
                                                 {n, static_cast<hsize_t>(t.feature_dim)}, h5::Layout::kContiguous,
                                                 StrCat(where, "/features")));
  }
  if (!t.labels.empty()) {
    TESSEL_RETURN_IF_ERROR(h5::WriteArray<int64_t>(grp.get(), "labels", t.labels.data(), {n},
                                                   LayoutFor(t.labels.size()), StrCat(where, "/labels")));
  }
  for (int m = 0; m < 3; ++m) {
    const auto& mask = Mask(t, m);
    if (mask.empty()) continue;
    TESSEL_RETURN_IF_ERROR(h5::WriteArray<uint8_t>(grp.get(), kMaskNames[m], mask.data(), {n}, LayoutFor(mask.size()),
                                                   StrCat(where, "/", kMaskNames[m])));
  }
  return Status::Ok();
}

Status WriteRelation(const HeteroGraph& g, size_t index, hid_t relations, std::string_view fname) {
  const Relation& r = g.relations[index];
  const std::string where = StrCat(fname, ": /relations/", index);
  TESSEL_ASSIGN_OR_RETURN(h5::Group grp, CreateGroup(relations, std::to_string(index), where));
  TESSEL_RETURN_IF_ERROR(h5::WriteStringAttribute(grp.get(), "name", r.name, where));
  TESSEL_RETURN_IF_ERROR(h5::WriteStringAttribute(grp.get(), "src_type", g.node_types[r.src_type].name, where));
  TESSEL_RETURN_IF_ERROR(h5::WriteStringAttribute(grp.get(), "dst_type", g.node_types[r.dst_type].name, where));
  TESSEL_RETURN_IF_ERROR(h5::WriteStringAttribute(grp.get(), "kind", std::string(RelationKindName(r.kind)), where));
  const hsize_t e = r.src.size();
  TESSEL_RETURN_IF_ERROR(
      h5::WriteArray<int64_t>(grp.get(), "src", r.src.data(), {e}, LayoutFor(e), StrCat(where, "/src")));
  TESSEL_RETURN_IF_ERROR(
      h5::WriteArray<int64_t>(grp.get(), "dst", r.dst.data(), {e}, LayoutFor(e), StrCat(where, "/dst")));
  return Status::Ok();
}

Status WriteContents(const HeteroGraph& g, hid_t file, std::string_view fname) {
  TESSEL_RETURN_IF_ERROR(WriteMeta(g, file, fname));
  {
    TESSEL_ASSIGN_OR_RETURN(h5::Group nodes, CreateGroup(file, "nodes", StrCat(fname, ": /nodes")));
    for (const auto& t : g.node_types) TESSEL_RETURN_IF_ERROR(WriteNodeType(t, nodes.get(), fname));
  }
  TESSEL_ASSIGN_OR_RETURN(h5::Group relations, CreateGroup(file, "relations", StrCat(fname, ": /relations")));
  for (size_t i = 0; i < g.relations.size(); ++i) {
    TESSEL_RETURN_IF_ERROR(WriteRelation(g, i, relations.get(), fname));
  }
  return Status::Ok();
}

// ---- reading ----------------------------------------------------------------------------------

Status ReadNodeType(hid_t file, const std::string& fname, int64_t num_classes, NodeType* t) {
  const std::string base = StrCat("/nodes/", t->name);
  TESSEL_ASSIGN_OR_RETURN(h5::Group grp, h5::OpenGroup(file, base, fname));
  TESSEL_ASSIGN_OR_RETURN(t->count, h5::ReadScalar<int64_t>(file, base + "/count", fname));
  if (t->count < 0) return BadDataError(StrCat(fname, ": ", base, "/count: negative count ", t->count));
  const auto n = static_cast<hsize_t>(t->count);
  std::vector<hsize_t> dims;
  if (h5::Exists(file, base + "/features")) {
    TESSEL_RETURN_IF_ERROR(h5::ReadArray<float>(file, base + "/features", fname, 2, &t->features, &dims));
    if (dims[0] != n || dims[1] == 0) {
      return BadDataError(
          StrCat(fname, ": ", base, "/features: shape [", dims[0], ", ", dims[1], "] does not match count ", n));
    }
    t->feature_dim = static_cast<int64_t>(dims[1]);
  }
  if (h5::Exists(file, base + "/labels")) {
    const std::string path = base + "/labels";
    TESSEL_RETURN_IF_ERROR(h5::ReadArray<int64_t>(file, path, fname, 1, &t->labels, &dims));
    if (dims[0] != n) {
      return BadDataError(StrCat(fname, ": ", path, ": size ", dims[0], " does not match count ", n));
    }
    TESSEL_RETURN_IF_ERROR(CheckLabels(t->labels, num_classes, StrCat(fname, ": ", path)));
  }
  for (int m = 0; m < 3; ++m) {
    const std::string path = StrCat(base, "/", kMaskNames[m]);
    if (!h5::Exists(file, path)) continue;
    TESSEL_RETURN_IF_ERROR(h5::ReadArray<uint8_t>(file, path, fname, 1, &Mask(*t, m), &dims));
    if (dims[0] != n) {
      return BadDataError(StrCat(fname, ": ", path, ": size ", dims[0], " does not match count ", n));
    }
    TESSEL_RETURN_IF_ERROR(CheckMask(Mask(*t, m), t->labels, StrCat(fname, ": ", path)));
  }
  return Status::Ok();
}

Result<RelationKind> ParseKind(const std::string& s, std::string_view where) {
  for (RelationKind k : {RelationKind::kBase, RelationKind::kInverse, RelationKind::kSelfLoop}) {
    if (s == RelationKindName(k)) return k;
  }
  return BadDataError(StrCat(where, ": attribute kind: '", s, "' is not base, inverse or self_loop"));
}

Status ReadRelation(hid_t file, const std::string& fname, const HeteroGraph& g, const std::string& expected_name,
                    size_t index, Relation* r) {
  const std::string base = StrCat("/relations/", index);
  const std::string where = StrCat(fname, ": ", base);
  TESSEL_ASSIGN_OR_RETURN(h5::Group grp, h5::OpenGroup(file, base, fname));
  TESSEL_ASSIGN_OR_RETURN(r->name, h5::ReadStringAttribute(grp.get(), "name", where));
  if (r->name != expected_name) {
    return BadDataError(
        StrCat(where, ": name '", r->name, "' differs from /meta relation_names[", index, "] '", expected_name, "'"));
  }
  auto type_index = [&](const std::string& attr, int32_t* out) -> Status {
    TESSEL_ASSIGN_OR_RETURN(std::string name, h5::ReadStringAttribute(grp.get(), attr, where));
    for (size_t t = 0; t < g.node_types.size(); ++t) {
      if (g.node_types[t].name == name) {
        *out = static_cast<int32_t>(t);
        return Status::Ok();
      }
    }
    return BadDataError(StrCat(where, ": attribute ", attr, ": unknown node type '", name, "'"));
  };
  TESSEL_RETURN_IF_ERROR(type_index("src_type", &r->src_type));
  TESSEL_RETURN_IF_ERROR(type_index("dst_type", &r->dst_type));
  TESSEL_ASSIGN_OR_RETURN(std::string kind, h5::ReadStringAttribute(grp.get(), "kind", where));
  TESSEL_ASSIGN_OR_RETURN(r->kind, ParseKind(kind, where));
  std::vector<hsize_t> src_dims, dst_dims;
  TESSEL_RETURN_IF_ERROR(h5::ReadArray<int64_t>(file, base + "/src", fname, 1, &r->src, &src_dims));
  TESSEL_RETURN_IF_ERROR(h5::ReadArray<int64_t>(file, base + "/dst", fname, 1, &r->dst, &dst_dims));
  if (src_dims[0] != dst_dims[0]) {
    return BadDataError(StrCat(where, "/dst: size ", dst_dims[0], " does not match src size ", src_dims[0]));
  }
  TESSEL_RETURN_IF_ERROR(CheckIds(r->src, g.node_types[r->src_type].count, StrCat(where, "/src")));
  TESSEL_RETURN_IF_ERROR(CheckIds(r->dst, g.node_types[r->dst_type].count, StrCat(where, "/dst")));
  return Status::Ok();
}

Result<HeteroGraph> ReadContents(hid_t file, const std::string& fname) {
  HeteroGraph g;
  const std::string meta_where = StrCat(fname, ": /meta");
  std::vector<std::string> type_names, rel_names;
  {
    TESSEL_ASSIGN_OR_RETURN(h5::Group meta, h5::OpenGroup(file, "/meta", fname));
    TESSEL_ASSIGN_OR_RETURN(int64_t version, h5::ReadInt64Attribute(meta.get(), "format_version", meta_where));
    if (version != kGraphFormatVersion) {
      return BadDataError(
          StrCat(meta_where, ": format_version ", version, " is not supported (expected ", kGraphFormatVersion, ")"));
    }
    TESSEL_ASSIGN_OR_RETURN(g.name, h5::ReadStringAttribute(meta.get(), "name", meta_where));
    TESSEL_ASSIGN_OR_RETURN(type_names, h5::ReadStringArrayAttribute(meta.get(), "node_types", meta_where));
    TESSEL_ASSIGN_OR_RETURN(rel_names, h5::ReadStringArrayAttribute(meta.get(), "relation_names", meta_where));
    TESSEL_ASSIGN_OR_RETURN(g.num_classes, h5::ReadInt64Attribute(meta.get(), "num_classes", meta_where));
    TESSEL_ASSIGN_OR_RETURN(g.source_fingerprint,
                            h5::ReadStringAttribute(meta.get(), "source_fingerprint", meta_where));
    if (H5Aexists(meta.get(), "class_names") > 0) {
      TESSEL_ASSIGN_OR_RETURN(g.class_names, h5::ReadStringArrayAttribute(meta.get(), "class_names", meta_where));
    }
  }
  if (g.num_classes < 0) return BadDataError(StrCat(meta_where, ": negative num_classes ", g.num_classes));
  if (!g.class_names.empty() && static_cast<int64_t>(g.class_names.size()) != g.num_classes) {
    return BadDataError(StrCat(meta_where, ": ", g.class_names.size(), " class_names for num_classes ", g.num_classes));
  }
  std::set<std::string> seen;
  for (const auto& name : type_names) {
    TESSEL_RETURN_IF_ERROR(CheckName(name, StrCat(meta_where, ": node type")));
    if (!seen.insert(name).second) return BadDataError(StrCat(meta_where, ": duplicate node type '", name, "'"));
    NodeType& t = g.node_types.emplace_back();
    t.name = name;
    TESSEL_RETURN_IF_ERROR(ReadNodeType(file, fname, g.num_classes, &t));
  }
  {
    TESSEL_ASSIGN_OR_RETURN(h5::Group rels, h5::OpenGroup(file, "/relations", fname));
    H5G_info_t info;
    if (H5Gget_info(rels.get(), &info) < 0) return h5::ReadError(StrCat(fname, ": /relations"), "unreadable");
    if (info.nlinks != rel_names.size()) {
      return BadDataError(StrCat(fname, ": /relations: holds ", info.nlinks, " entries but /meta lists ",
                                 rel_names.size(), " relation_names"));
    }
  }
  g.relations.resize(rel_names.size());
  for (size_t i = 0; i < rel_names.size(); ++i) {
    TESSEL_RETURN_IF_ERROR(ReadRelation(file, fname, g, rel_names[i], i, &g.relations[i]));
  }
  // Everything above names the dataset; this is the backstop for invariants that span datasets.
  Status st = g.Validate();
  if (!st.ok()) return st.WithContext(fname);
  return g;
}

}  // namespace

std::string_view RelationKindName(RelationKind kind) {
  switch (kind) {
    case RelationKind::kBase:
      return "base";
    case RelationKind::kInverse:
      return "inverse";
    case RelationKind::kSelfLoop:
      return "self_loop";
  }
  return "unknown";
}

int64_t HeteroGraph::num_nodes() const {
  int64_t n = 0;
  for (const auto& t : node_types) n += t.count;
  return n;
}

int64_t HeteroGraph::num_edges() const {
  int64_t e = 0;
  for (const auto& r : relations) e += static_cast<int64_t>(r.src.size());
  return e;
}

int64_t HeteroGraph::NodeOffset(int32_t type) const {
  int64_t offset = 0;
  for (int32_t t = 0; t < type && t < static_cast<int32_t>(node_types.size()); ++t) offset += node_types[t].count;
  return offset;
}

Status HeteroGraph::Validate() const {
  if (num_classes < 0) return BadDataError(StrCat("negative num_classes ", num_classes));
  if (!class_names.empty() && static_cast<int64_t>(class_names.size()) != num_classes) {
    return BadDataError(StrCat(class_names.size(), " class names for ", num_classes, " classes"));
  }
  std::set<std::string> names;
  int64_t first_global_id = 0;  // of the current type
  for (const auto& t : node_types) {
    TESSEL_RETURN_IF_ERROR(CheckName(t.name, "node type"));
    if (!names.insert(t.name).second) return BadDataError(StrCat("duplicate node type '", t.name, "'"));
    const std::string where = StrCat("node type ", t.name);
    if (t.count < 0) return BadDataError(StrCat(where, ": negative count ", t.count));
    const auto n = static_cast<size_t>(t.count);
    if (t.feature_dim < 0 || t.features.size() != n * static_cast<size_t>(t.feature_dim)) {
      return BadDataError(
          StrCat(where, " features: ", t.features.size(), " values for ", n, " nodes x dim ", t.feature_dim));
    }
    if (t.feature_dim > 0) {
      // Named by the dataset, so that ReadGraph's "file: " prefix gives "g.h5: /nodes/paper/features: ...".
      const int64_t bad = FirstNonFinite(t.features.data(), static_cast<int64_t>(t.features.size()));
      if (bad >= 0) {
        const int64_t local = bad / t.feature_dim;
        return NonFiniteFeatureError(StrCat("/nodes/", t.name, "/features"), t.name, local, first_global_id + local,
                                     bad % t.feature_dim, t.features[static_cast<size_t>(bad)]);
      }
    }
    if (!t.labels.empty() && t.labels.size() != n) {
      return BadDataError(StrCat(where, " labels: size ", t.labels.size(), " does not match count ", n));
    }
    TESSEL_RETURN_IF_ERROR(CheckLabels(t.labels, num_classes, StrCat(where, " labels")));
    for (int m = 0; m < 3; ++m) {
      const auto& mask = Mask(t, m);
      if (!mask.empty() && mask.size() != n) {
        return BadDataError(StrCat(where, " ", kMaskNames[m], ": size ", mask.size(), " does not match count ", n));
      }
      TESSEL_RETURN_IF_ERROR(CheckMask(mask, t.labels, StrCat(where, " ", kMaskNames[m])));
    }
    first_global_id += t.count;
  }
  const auto num_types = static_cast<int32_t>(node_types.size());
  for (size_t i = 0; i < relations.size(); ++i) {
    const Relation& r = relations[i];
    const std::string where = StrCat("relation ", i, " (", r.name, ")");
    if (r.name.empty()) return BadDataError(StrCat(where, ": empty name"));
    if (r.src_type < 0 || r.src_type >= num_types || r.dst_type < 0 || r.dst_type >= num_types) {
      return BadDataError(StrCat(where, ": node type out of range [0, ", num_types, ")"));
    }
    if (r.kind != RelationKind::kBase && r.kind != RelationKind::kInverse && r.kind != RelationKind::kSelfLoop) {
      return BadDataError(StrCat(where, ": unknown kind ", static_cast<int>(r.kind)));
    }
    if (r.src.size() != r.dst.size()) {
      return BadDataError(StrCat(where, ": ", r.src.size(), " sources but ", r.dst.size(), " destinations"));
    }
    TESSEL_RETURN_IF_ERROR(CheckIds(r.src, node_types[r.src_type].count, StrCat(where, " src")));
    TESSEL_RETURN_IF_ERROR(CheckIds(r.dst, node_types[r.dst_type].count, StrCat(where, " dst")));
  }
  return Status::Ok();
}

Status WriteGraph(const HeteroGraph& graph, const std::string& path) {
  TESSEL_RETURN_IF_ERROR(graph.Validate().WithContext(StrCat("refusing to write ", path)));
  h5::ScopedErrorSilencer silence;
  TempFile temp(path);
  {
    h5::PropList fapl(H5Pcreate(H5P_FILE_ACCESS));
    // v1.8 object headers allow attributes beyond 64 KiB (long relation_names lists).
    H5Pset_libver_bounds(fapl.get(), H5F_LIBVER_V18, H5F_LIBVER_LATEST);
    // Every object starts on a 64-byte boundary, so a mapped features dataset yields aligned float rows
    // (HDF5 packs objects at any byte otherwise). It costs a few bytes of padding per object.
    H5Pset_alignment(fapl.get(), 1, kFileAlignment);
    h5::File file(H5Fcreate(temp.path().c_str(), H5F_ACC_EXCL, H5P_DEFAULT, fapl.get()));
    if (!file.valid()) return StorageError(StrCat(path, ": cannot create ", DescribeCreateFailure(temp.path(), errno)));
    TESSEL_RETURN_IF_ERROR(WriteContents(graph, file.get(), path));
    if (file.Close() < 0) return h5::WriteError(path, "cannot close (disk full?)");
  }
  return temp.Commit();
}

Result<HeteroGraph> ReadGraph(const std::string& path) {
  h5::ScopedErrorSilencer silence;
  TESSEL_ASSIGN_OR_RETURN(h5::File file, h5::OpenFileReadOnly(path));
  return ReadContents(file.get(), path);
}

}  // namespace tessel::storage
