#include "storage/chunked_import.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "core/json.h"
#include "core/logging.h"
#include "storage/edges_import.h"
#include "storage/line_reader.h"
#include "storage/npy.h"

namespace tessel::storage {
namespace {

namespace fs = std::filesystem;

// Errors in metadata.json name the file and the key path, e.g. "DIR/metadata.json: edges.a:r:b.data: ...".
class Meta {
 public:
  explicit Meta(std::string path) : path_(std::move(path)) {}
  Status Bad(const std::string& key, const std::string& why) const {
    return BadDataError(StrCat(path_, ": ", key, ": ", why));
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

Result<std::vector<std::string>> Strings(const Meta& m, const Json& doc, const std::string& key) {
  if (!doc.contains(key)) return m.Bad(key, "missing");
  const Json& v = doc[key];
  if (!v.is_array()) return m.Bad(key, "expected a list of strings");
  std::vector<std::string> out;
  for (const Json& s : v) {
    if (!s.is_string()) return m.Bad(key, StrCat("element ", out.size(), " is not a string"));
    out.push_back(s.get<std::string>());
  }
  return out;
}

Result<int64_t> Count(const Meta& m, const Json& v, const std::string& key) {
  if (!v.is_number_integer() || v.get<int64_t>() < 0) return m.Bad(key, StrCat("expected a count, got ", v.dump()));
  return v.get<int64_t>();
}

// The counts of `types` things under "num_<what>_per_chunk" (a list of per-chunk lists) and/or
// "num_<what>_per_type" (a list of totals): *totals gets one total per type, *chunks the per-chunk counts
// (empty lists when only the totals were given).
Status Counts(const Meta& m, const Json& doc, const std::string& what, size_t types, std::vector<int64_t>* totals,
              std::vector<std::vector<int64_t>>* chunks) {
  const std::string per_chunk = StrCat("num_", what, "_per_chunk"), per_type = StrCat("num_", what, "_per_type");
  totals->assign(types, -1);
  chunks->assign(types, {});
  if (!doc.contains(per_chunk) && !doc.contains(per_type)) {
    return m.Bad(per_chunk, StrCat("missing (and no ", per_type, ")"));
  }
  if (doc.contains(per_chunk)) {
    const Json& v = doc[per_chunk];
    if (!v.is_array() || v.size() != types) {
      return m.Bad(per_chunk, StrCat("expected a list of ", types, " lists (one per type)"));
    }
    for (size_t t = 0; t < types; ++t) {
      const std::string key = StrCat(per_chunk, "[", t, "]");
      if (!v[t].is_array()) return m.Bad(key, "expected a list of chunk sizes");
      int64_t sum = 0;
      for (const Json& c : v[t]) {
        TESSEL_ASSIGN_OR_RETURN(int64_t n, Count(m, c, key));
        (*chunks)[t].push_back(n);
        if (__builtin_add_overflow(sum, n, &sum)) return m.Bad(key, "the sum overflows 64 bits");
      }
      (*totals)[t] = sum;
    }
  }
  if (doc.contains(per_type)) {
    const Json& v = doc[per_type];
    if (!v.is_array() || v.size() != types) return m.Bad(per_type, StrCat("expected a list of ", types, " counts"));
    for (size_t t = 0; t < types; ++t) {
      TESSEL_ASSIGN_OR_RETURN(int64_t n, Count(m, v[t], StrCat(per_type, "[", t, "]")));
      if ((*totals)[t] >= 0 && (*totals)[t] != n) {
        return m.Bad(per_type, StrCat("type ", t, " has ", n, ", but ", per_chunk, " sums to ", (*totals)[t]));
      }
      (*totals)[t] = n;
    }
  }
  return Status::Ok();
}

Result<ChunkFiles> Files(const Meta& m, const std::string& dir, const Json& spec, const std::string& key) {
  if (!spec.is_object()) return m.Bad(key, "expected {\"format\": {...}, \"data\": [...]}");
  if (!spec.contains("format") || !spec["format"].is_object() || !spec["format"].contains("name") ||
      !spec["format"]["name"].is_string()) {
    return m.Bad(StrCat(key, ".format"), "expected {\"name\": \"csv\" | \"numpy\"}");
  }
  ChunkFiles f;
  f.format = spec["format"]["name"].get<std::string>();
  if (f.format == "parquet") {
    return m.Bad(StrCat(key, ".format"),
                 "Parquet chunks are not supported (no Debian library reads them here); write the chunks as "
                 "\"numpy\" (numpy.save) or \"csv\"");
  }
  if (f.format != "csv" && f.format != "numpy") {
    return m.Bad(StrCat(key, ".format.name"), StrCat("'", f.format, "' is not \"csv\" or \"numpy\""));
  }
  if (f.format == "csv" && spec["format"].contains("delimiter")) {
    const Json& d = spec["format"]["delimiter"];
    if (!d.is_string() || d.get<std::string>().size() != 1) {
      return m.Bad(StrCat(key, ".format.delimiter"), "expected a one-character string");
    }
    f.delimiter = d.get<std::string>()[0];
  }
  if (!spec.contains("data") || !spec["data"].is_array())
    return m.Bad(StrCat(key, ".data"), "expected a list of paths");
  for (const Json& p : spec["data"]) {
    if (!p.is_string()) return m.Bad(StrCat(key, ".data"), "every element must be a path");
    const fs::path path(p.get<std::string>());
    f.paths.push_back(path.is_absolute() ? path.string() : (fs::path(dir) / path).string());
  }
  return f;
}

Result<std::string> ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return BadDataError(StrCat(path, ": cannot open (a chunked graph directory holds metadata.json)"));
  std::ostringstream s;
  s << in.rdbuf();
  if (in.bad()) return StorageError(StrCat(path, ": read failed"));
  return s.str();
}

// `where` makes the error's location only when there is an error: this runs once per edge.
template <typename Where>
Status CheckId(const ChunkedGraph& g, const Where& where, const char* end, int64_t id, int32_t type) {
  const ChunkedNodeType& t = g.node_types[static_cast<size_t>(type)];
  if (id < 0 || id >= t.count) {
    return BadDataError(
        StrCat(where(), ": ", end, " id ", id, " is out of range for node type '", t.name, "' (", t.count, " nodes)"));
  }
  return Status::Ok();
}

// Appends rows [first, first + count) of node_data `key` of node type `t` as T to *out, reading only the
// chunks (and within them the rows) that hold them; *width gets the row width from the chunks' headers,
// so every reader of any share agrees on it. Absent key: *out stays empty, *width 0. Every chunk's
// header is checked (widths agree, the rows add up to the type's count) whatever share is read.
template <typename T>
Status ReadNodeData(const ChunkedGraph& g, int32_t t, const std::string& key, int64_t first, int64_t count,
                    std::vector<T>* out, int64_t* width) {
  const ChunkedNodeType& type = g.node_types[static_cast<size_t>(t)];
  *width = 0;
  const auto it =
      std::find_if(type.data.begin(), type.data.end(), [&](const ChunkedNodeData& d) { return d.key == key; });
  if (it == type.data.end()) return Status::Ok();
  std::vector<NpyHeader> heads;
  int64_t rows = 0;
  for (const std::string& path : it->files.paths) {
    TESSEL_ASSIGN_OR_RETURN(NpyHeader h, ReadNpyHeader(path));
    if (h.shape.empty()) return BadDataError(StrCat(path, ": a scalar; expected one row per node"));
    if (!heads.empty() && h.row_width() != heads.front().row_width()) {
      return BadDataError(StrCat(path, ": rows of ", h.row_width(), " values, the earlier chunks of ", type.name, "/",
                                 key, " have ", heads.front().row_width()));
    }
    rows += h.rows();
    heads.push_back(std::move(h));
  }
  if (rows != type.count) {
    return BadDataError(StrCat(g.metadata_path, ": node_data.", type.name, ".", key, ": its chunks hold ", rows,
                               " rows, node type '", type.name, "' has ", type.count, " nodes"));
  }
  *width = heads.empty() ? 0 : heads.front().row_width();
  out->reserve(out->size() + static_cast<size_t>(count * *width));
  int64_t start = 0;
  for (size_t c = 0; c < heads.size(); start += heads[c].rows(), ++c) {
    const int64_t lo = std::max(first, start), hi = std::min(first + count, start + heads[c].rows());
    if (lo >= hi) continue;
    TESSEL_RETURN_IF_ERROR(AppendNpyRows(it->files.paths[c], lo - start, hi - lo, out).status());
  }
  return Status::Ok();
}

}  // namespace

Result<ChunkedGraph> ReadChunkedMetadata(const std::string& dir) {
  ChunkedGraph g;
  g.dir = dir;
  g.metadata_path = (fs::path(dir) / "metadata.json").string();
  const Meta m(g.metadata_path);
  TESSEL_ASSIGN_OR_RETURN(std::string text, ReadText(g.metadata_path));
  TESSEL_ASSIGN_OR_RETURN(Json doc, ParseJson(text, g.metadata_path));
  if (!doc.is_object()) return m.Bad("(top level)", "expected a JSON object");
  if (doc.contains("graph_name")) {
    if (!doc["graph_name"].is_string()) return m.Bad("graph_name", "expected a string");
    g.graph_name = doc["graph_name"].get<std::string>();
  }

  TESSEL_ASSIGN_OR_RETURN(std::vector<std::string> ntypes, Strings(m, doc, "node_type"));
  if (ntypes.empty()) return m.Bad("node_type", "no node types");
  std::map<std::string, int32_t> type_of;
  for (const std::string& n : ntypes) {
    if (n.empty() || n.find(':') != std::string::npos)
      return m.Bad("node_type", StrCat("'", n, "' is not a type name"));
    if (!type_of.emplace(n, static_cast<int32_t>(type_of.size())).second) {
      return m.Bad("node_type", StrCat("'", n, "' is listed twice"));
    }
  }
  std::vector<int64_t> totals;
  std::vector<std::vector<int64_t>> chunks;
  TESSEL_RETURN_IF_ERROR(Counts(m, doc, "nodes", ntypes.size(), &totals, &chunks));
  for (size_t t = 0; t < ntypes.size(); ++t) {
    g.node_types.push_back({ntypes[t], totals[t], std::move(chunks[t]), {}});
  }

  TESSEL_ASSIGN_OR_RETURN(std::vector<std::string> etypes, Strings(m, doc, "edge_type"));
  TESSEL_RETURN_IF_ERROR(Counts(m, doc, "edges", etypes.size(), &totals, &chunks));
  std::map<std::string, int32_t> etype_of;
  for (size_t e = 0; e < etypes.size(); ++e) {
    const std::string& c = etypes[e];
    const size_t a = c.find(':'), b = a == std::string::npos ? a : c.find(':', a + 1);
    if (b == std::string::npos || c.find(':', b + 1) != std::string::npos || a == 0 || b == a + 1 ||
        b + 1 == c.size()) {
      return m.Bad("edge_type", StrCat("'", c, "' is not \"src_type:relation:dst_type\""));
    }
    ChunkedEdgeType et;
    et.canonical = c;
    et.relation = c.substr(a + 1, b - a - 1);
    for (const auto& [end, name] :
         {std::pair{&et.src_type, c.substr(0, a)}, std::pair{&et.dst_type, c.substr(b + 1)}}) {
      const auto it = type_of.find(name);
      if (it == type_of.end()) return m.Bad("edge_type", StrCat("'", c, "': '", name, "' is not in node_type"));
      *end = it->second;
    }
    et.count = totals[e];
    et.chunk_counts = std::move(chunks[e]);
    if (!etype_of.emplace(c, static_cast<int32_t>(e)).second)
      return m.Bad("edge_type", StrCat("'", c, "' is listed twice"));
    g.edge_types.push_back(std::move(et));
  }

  if (!doc.contains("edges") || !doc["edges"].is_object()) return m.Bad("edges", "missing, or not an object");
  for (const auto& [key, spec] : doc["edges"].items()) {
    const auto it = etype_of.find(key);
    if (it == etype_of.end()) return m.Bad(StrCat("edges.", key), "not in edge_type");
    ChunkedEdgeType& et = g.edge_types[static_cast<size_t>(it->second)];
    TESSEL_ASSIGN_OR_RETURN(et.files, Files(m, dir, spec, StrCat("edges.", key)));
    if (!et.chunk_counts.empty() && et.chunk_counts.size() != et.files.paths.size()) {
      return m.Bad(
          StrCat("edges.", key, ".data"),
          StrCat(et.files.paths.size(), " files, but num_edges_per_chunk gives ", et.chunk_counts.size(), " chunks"));
    }
  }
  for (const ChunkedEdgeType& et : g.edge_types) {
    if (et.files.paths.empty() && et.count > 0) {
      return m.Bad(StrCat("edges.", et.canonical), StrCat("missing: the edge type has ", et.count, " edges"));
    }
  }

  if (doc.contains("node_data")) {
    if (!doc["node_data"].is_object()) return m.Bad("node_data", "expected an object of node types");
    for (const auto& [ntype, keys] : doc["node_data"].items()) {
      const auto it = type_of.find(ntype);
      if (it == type_of.end()) return m.Bad(StrCat("node_data.", ntype), "not in node_type");
      if (!keys.is_object()) return m.Bad(StrCat("node_data.", ntype), "expected an object of keys");
      for (const auto& [key, spec] : keys.items()) {
        const std::string where = StrCat("node_data.", ntype, ".", key);
        TESSEL_ASSIGN_OR_RETURN(ChunkFiles files, Files(m, dir, spec, where));
        if (files.format != "numpy") return m.Bad(where, "node data must be \"numpy\" chunks");
        g.node_types[static_cast<size_t>(it->second)].data.push_back({key, std::move(files)});
      }
    }
  }
  if (doc.contains("edge_data")) {
    if (!doc["edge_data"].is_object()) return m.Bad("edge_data", "expected an object of edge types");
    for (const auto& [etype, keys] : doc["edge_data"].items()) {
      const auto it = etype_of.find(etype);
      if (it == etype_of.end()) return m.Bad(StrCat("edge_data.", etype), "not in edge_type");
      if (!keys.is_object()) return m.Bad(StrCat("edge_data.", etype), "expected an object of keys");
      for (const auto& [key, spec] : keys.items())
        g.edge_types[static_cast<size_t>(it->second)].data_keys.push_back(key);
    }
  }
  return g;
}

Status ReadEdgeChunk(const ChunkedGraph& g, int32_t e, int32_t chunk, std::vector<int64_t>* src,
                     std::vector<int64_t>* dst) {
  const ChunkedEdgeType& et = g.edge_types[static_cast<size_t>(e)];
  const std::string& path = et.files.paths[static_cast<size_t>(chunk)];
  const size_t before = src->size();
  if (et.files.format == "numpy") {
    std::vector<int64_t> pairs;
    TESSEL_ASSIGN_OR_RETURN(NpyHeader h, AppendNpy(path, &pairs));
    if (h.shape.size() != 2 || h.shape[1] != 2) {
      return BadDataError(StrCat(path, ": expected an [edges, 2] array of (src, dst) pairs"));
    }
    for (int64_t i = 0; i < h.shape[0]; ++i) {
      const auto where = [&] { return StrCat(path, ": row ", i); };
      TESSEL_RETURN_IF_ERROR(CheckId(g, where, "source", pairs[2 * i], et.src_type));
      TESSEL_RETURN_IF_ERROR(CheckId(g, where, "destination", pairs[2 * i + 1], et.dst_type));
      src->push_back(pairs[2 * i]);
      dst->push_back(pairs[2 * i + 1]);
    }
  } else {
    const char delim = et.files.delimiter;
    TESSEL_RETURN_IF_ERROR(
        ForEachLine(path, {}, [&](const std::string& source, int64_t line_no, std::string_view line) {
          if (line.empty()) return Status::Ok();
          const size_t cut = line.find(delim);
          const auto where = [&] { return StrCat(source, ":", line_no); };
          if (cut == std::string_view::npos || line.find(delim, cut + 1) != std::string_view::npos) {
            return BadDataError(StrCat(where(), ": expected two ids separated by '", std::string(1, delim), "', got '",
                                       line.substr(0, 80), "'"));
          }
          int64_t ids[2] = {0, 0};
          const std::string_view parts[2] = {line.substr(0, cut), line.substr(cut + 1)};
          for (int i = 0; i < 2; ++i) {
            const auto [p, ec] = std::from_chars(parts[i].data(), parts[i].data() + parts[i].size(), ids[i]);
            if (ec != std::errc() || p != parts[i].data() + parts[i].size()) {
              return BadDataError(StrCat(where(), ": '", parts[i].substr(0, 40), "' is not an integer id"));
            }
          }
          TESSEL_RETURN_IF_ERROR(CheckId(g, where, "source", ids[0], et.src_type));
          TESSEL_RETURN_IF_ERROR(CheckId(g, where, "destination", ids[1], et.dst_type));
          src->push_back(ids[0]);
          dst->push_back(ids[1]);
          return Status::Ok();
        }));
  }
  const auto got = static_cast<int64_t>(src->size() - before);
  if (!et.chunk_counts.empty() && got != et.chunk_counts[static_cast<size_t>(chunk)]) {
    return BadDataError(StrCat(path, ": ", got, " edges, but ", g.metadata_path, " (num_edges_per_chunk of '",
                               et.canonical, "') says ", et.chunk_counts[static_cast<size_t>(chunk)]));
  }
  return Status::Ok();
}

Result<ChunkedNodeRows> ReadNodeRows(const ChunkedGraph& g, const ChunkedImportOptions& o, int32_t t, int64_t first,
                                     int64_t count, NodeColumns columns) {
  const ChunkedNodeType& ct = g.node_types[static_cast<size_t>(t)];
  ChunkedNodeRows rows;
  // Without the features their headers are still read: the width, and that the chunks add up.
  TESSEL_RETURN_IF_ERROR(ReadNodeData(g, t, o.features, first, columns == NodeColumns::kSupervision ? 0 : count,
                                      &rows.features, &rows.feature_dim));
  if (columns == NodeColumns::kFeatures) return rows;
  int64_t width = 0;
  TESSEL_RETURN_IF_ERROR(ReadNodeData(g, t, o.labels, first, count, &rows.labels, &width));
  if (!rows.labels.empty() && width != 1) {
    return BadDataError(StrCat(g.metadata_path, ": node_data.", ct.name, ".", o.labels, ": rows of ", width,
                               " values; expected one class id per node"));
  }
  for (size_t i = 0; i < rows.labels.size(); ++i) {
    if (rows.labels[i] < -1) {
      return BadDataError(StrCat(g.metadata_path, ": node_data.", ct.name, ".", o.labels, ": node ",
                                 first + static_cast<int64_t>(i), " has label ", rows.labels[i],
                                 " (a class id, or -1 for unlabelled)"));
    }
  }
  for (const auto& [key, mask] : {std::pair{&o.train_mask, &rows.train_mask}, std::pair{&o.val_mask, &rows.val_mask},
                                  std::pair{&o.test_mask, &rows.test_mask}}) {
    TESSEL_RETURN_IF_ERROR(ReadNodeData(g, t, *key, first, count, mask, &width));
    if (!mask->empty() && width != 1) {
      return BadDataError(StrCat(g.metadata_path, ": node_data.", ct.name, ".", *key, ": rows of ", width,
                                 " values; expected one 0/1 per node"));
    }
  }
  return rows;
}

HeteroGraph ChunkedSkeleton(const ChunkedGraph& cg, bool add_inverse, bool add_self_loop) {
  HeteroGraph g;
  for (const ChunkedNodeType& ct : cg.node_types) {
    NodeType& nt = g.node_types.emplace_back();
    nt.name = ct.name;
    nt.count = ct.count;
  }
  std::map<std::string, int> uses;
  for (const ChunkedEdgeType& et : cg.edge_types) ++uses[et.relation];
  for (const ChunkedEdgeType& et : cg.edge_types) {
    Relation& r = g.relations.emplace_back();
    r.name = uses[et.relation] == 1 ? et.relation : et.canonical;
    r.src_type = et.src_type;
    r.dst_type = et.dst_type;
  }
  for (Relation& d : DerivedRelationHeads(g, add_inverse, add_self_loop)) g.relations.push_back(std::move(d));
  return g;
}

std::vector<std::string> IgnoredChunkedData(const ChunkedGraph& cg, const ChunkedImportOptions& o) {
  std::vector<std::string> ignored;
  for (const ChunkedNodeType& ct : cg.node_types) {
    for (const ChunkedNodeData& d : ct.data) {
      if (d.key != o.features && d.key != o.labels && d.key != o.train_mask && d.key != o.val_mask &&
          d.key != o.test_mask) {
        ignored.push_back(StrCat(ct.name, "/", d.key));
      }
    }
  }
  for (const ChunkedEdgeType& et : cg.edge_types) {
    for (const std::string& key : et.data_keys) ignored.push_back(StrCat(et.canonical, "/", key));
  }
  return ignored;
}

Result<ChunkedImport> ImportChunked(const ChunkedImportOptions& o) {
  TESSEL_ASSIGN_OR_RETURN(ChunkedGraph cg, ReadChunkedMetadata(o.dir));
  ChunkedImport out;
  HeteroGraph& g = out.graph;
  g.name = !o.name.empty() ? o.name : !cg.graph_name.empty() ? cg.graph_name : StemOf(fs::absolute(o.dir).filename());
  g.source_fingerprint =
      StrCat("chunked ", DescribeSourceFile(cg.metadata_path), "; features=", o.features, "; labels=", o.labels,
             "; masks=", o.train_mask, ",", o.val_mask, ",", o.test_mask, "; inverse=", o.add_inverse ? 1 : 0,
             "; self_loop=", o.add_self_loop ? 1 : 0, "; name=", g.name);
  const HeteroGraph skeleton = ChunkedSkeleton(cg, false, false);
  int64_t max_label = -1;
  for (int32_t t = 0; t < static_cast<int32_t>(cg.node_types.size()); ++t) {
    const ChunkedNodeType& ct = cg.node_types[static_cast<size_t>(t)];
    TESSEL_ASSIGN_OR_RETURN(ChunkedNodeRows rows, ReadNodeRows(cg, o, t, 0, ct.count));
    NodeType& nt = g.node_types.emplace_back(skeleton.node_types[static_cast<size_t>(t)]);
    nt.features = std::move(rows.features);
    nt.feature_dim = nt.features.empty() ? 0 : rows.feature_dim;
    nt.labels = std::move(rows.labels);
    nt.train_mask = std::move(rows.train_mask);
    nt.val_mask = std::move(rows.val_mask);
    nt.test_mask = std::move(rows.test_mask);
    for (const int64_t l : nt.labels) max_label = std::max(max_label, l);
  }
  g.num_classes = max_label + 1;

  for (int32_t e = 0; e < static_cast<int32_t>(cg.edge_types.size()); ++e) {
    const ChunkedEdgeType& et = cg.edge_types[static_cast<size_t>(e)];
    Relation& r = g.relations.emplace_back(skeleton.relations[static_cast<size_t>(e)]);
    r.src.reserve(static_cast<size_t>(et.count));
    r.dst.reserve(static_cast<size_t>(et.count));
    for (int32_t c = 0; c < static_cast<int32_t>(et.files.paths.size()); ++c) {
      TESSEL_RETURN_IF_ERROR(ReadEdgeChunk(cg, e, c, &r.src, &r.dst));
    }
    if (static_cast<int64_t>(r.src.size()) != et.count) {
      return BadDataError(StrCat(cg.metadata_path, ": edge type '", et.canonical, "': its chunks hold ", r.src.size(),
                                 " edges, metadata.json says ", et.count));
    }
  }
  out.ignored = IgnoredChunkedData(cg, o);
  AddDerivedRelations(g, o.add_inverse, o.add_self_loop);
  TESSEL_RETURN_IF_ERROR(g.Validate());
  return out;
}

}  // namespace tessel::storage
