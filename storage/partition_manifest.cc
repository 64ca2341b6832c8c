#include "storage/partition_manifest.h"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>

#include "core/json.h"
#include "core/logging.h"
#include "storage/digest.h"

namespace tessel::storage {
namespace {

// Errors name the file and the key: "DIR/partition.json: per_part[1].owned: expected a count".
class Reader {
 public:
  Reader(const Json& doc, std::string path) : doc_(doc), path_(std::move(path)) {}
  Status Bad(const std::string& key, const std::string& why) const {
    return BadDataError(StrCat(path_, ": ", key, ": ", why));
  }
  Result<int64_t> Count(const Json& obj, const std::string& key, const std::string& at) const {
    if (!obj.contains(key)) return Bad(at + key, "missing");
    const Json& v = obj.at(key);
    if (!v.is_number_integer() || v.get<int64_t>() < 0)
      return Bad(at + key, StrCat("expected a count, got ", v.dump()));
    return v.get<int64_t>();
  }
  Result<int64_t> Count(const std::string& key) const { return Count(doc_, key, ""); }
  Result<double> Number(const std::string& key) const {
    if (!doc_.contains(key) || !doc_.at(key).is_number()) return Bad(key, "missing or not a number");
    return doc_.at(key).get<double>();
  }
  Result<std::string> Text(const Json& obj, const std::string& key, const std::string& at) const {
    if (!obj.contains(key) || !obj.at(key).is_string()) return Bad(at + key, "missing or not a string");
    return obj.at(key).get<std::string>();
  }
  Result<std::string> Text(const std::string& key) const { return Text(doc_, key, ""); }
  Result<std::vector<std::string>> Texts(const std::string& key) const {
    if (!doc_.contains(key) || !doc_.at(key).is_array()) return Bad(key, "missing or not a list");
    std::vector<std::string> out;
    for (const Json& s : doc_.at(key)) {
      if (!s.is_string()) return Bad(key, StrCat("element ", out.size(), " is not a string"));
      out.push_back(s.get<std::string>());
    }
    return out;
  }

 private:
  const Json& doc_;
  std::string path_;
};

}  // namespace

PartSizes SizesOf(const WorkerPartition& p) {
  PartSizes s;
  s.part = p.part;
  s.file = StrCat("part-", p.part, ".h5");
  s.owned = p.num_owned;
  s.halo = p.num_rows() - p.num_owned;
  s.edges = static_cast<int64_t>(p.src.size());
  // Edges are sorted by (relation, src): a new source within a relation is a new pair.
  for (int32_t r = 0; r < p.num_relations(); ++r) {
    int64_t prev = -1;
    for (int64_t e = p.rel_ptr[static_cast<size_t>(r)]; e < p.rel_ptr[static_cast<size_t>(r) + 1]; ++e) {
      if (p.src[static_cast<size_t>(e)] != prev) ++s.pairs, prev = p.src[static_cast<size_t>(e)];
    }
  }
  for (size_t i = 0; i < p.train_mask.size(); ++i) s.train += (p.train_mask[i] && p.labels[i] >= 0) ? 1 : 0;
  s.features = p.num_owned * p.feature_dim;  // held, or still to be written (PartitionFileWriter)
  return s;
}

std::string PartitionManifest::PartFile(const std::string& dir, int32_t part) const {
  return (std::filesystem::path(dir) / per_part[static_cast<size_t>(part)].file).string();
}

std::string GraphHash(const HeteroGraph& g) {
  Digest d;
  d.Str(g.name);
  d.Int(g.num_classes);
  d.Int(static_cast<int64_t>(g.node_types.size()));
  for (const NodeType& t : g.node_types) {
    d.Str(t.name);
    d.Int(t.count);
    d.Int(t.feature_dim);
    d.Array(t.features);
    d.Array(t.labels);
    d.Array(t.train_mask);
    d.Array(t.val_mask);
    d.Array(t.test_mask);
  }
  d.Int(static_cast<int64_t>(g.relations.size()));
  for (const Relation& r : g.relations) {
    d.Str(r.name);
    d.Int(r.src_type);
    d.Int(r.dst_type);
    d.Int(static_cast<int64_t>(r.kind));
    d.Array(r.src);
    d.Array(r.dst);
  }
  return d.Hex();
}

std::string FormatPartitionManifest(const PartitionManifest& m) {
  Json doc = Json::object();
  doc["format"] = "tessel-partition";
  doc["format_version"] = m.format_version;
  doc["graph"] = m.graph;
  doc["graph_name"] = m.graph_name;
  doc["graph_hash"] = m.graph_hash;
  doc["nodes"] = m.nodes;
  doc["edges"] = m.edges;
  doc["relations"] = m.relations;
  doc["classes"] = m.classes;
  doc["feature_dim"] = m.feature_dim;
  doc["method"] = m.method;
  doc["parts"] = m.parts;
  doc["seed"] = m.seed;
  doc["edge_cut"] = m.edge_cut;
  doc["random_edge_cut"] = m.random_edge_cut;
  doc["cut_ratio"] =
      m.random_edge_cut > 0 ? static_cast<double>(m.edge_cut) / static_cast<double>(m.random_edge_cut) : 1.0;
  doc["constraints"] = m.constraints;
  doc["imbalance"] = m.imbalance;
  doc["rebalance_moves"] = m.rebalance_moves;
  doc["seconds"] = m.seconds;
  doc["files"] = m.files;
  Json& per_part = doc["per_part"] = Json::array();
  for (const PartSizes& p : m.per_part) {
    per_part.push_back({{"part", p.part},
                        {"file", p.file},
                        {"owned", p.owned},
                        {"halo", p.halo},
                        {"edges", p.edges},
                        {"pairs", p.pairs},
                        {"train", p.train},
                        {"features", p.features}});
  }
  return FormatJson(doc, JsonLayout::kIndented) + "\n";
}

Result<PartitionManifest> ReadPartitionManifest(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / kPartitionManifestName).string();
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return BadDataError(StrCat(path, ": cannot open it (a directory written by `tessel partition` holds ",
                               kPartitionManifestName, " and part-K.h5)"));
  }
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  TESSEL_ASSIGN_OR_RETURN(Json doc, ParseJson(text, path));
  if (!doc.is_object()) return BadDataError(StrCat(path, ": expected a JSON object"));
  const Reader r(doc, path);
  PartitionManifest m;
  if (!doc.contains("graph_hash")) {
    return r.Bad("graph_hash", "missing: an older `tessel partition` wrote it; partition the graph again");
  }
  const auto format = r.Text("format");
  if (!format.ok() || *format != "tessel-partition") {
    return r.Bad("format", "missing or not \"tessel-partition\": not written by `tessel partition`");
  }
  TESSEL_ASSIGN_OR_RETURN(m.format_version, r.Count("format_version"));
  if (m.format_version != kPartitionManifestVersion) {
    return r.Bad("format_version",
                 StrCat(m.format_version, " is not supported (this build reads ", kPartitionManifestVersion, ")"));
  }
  TESSEL_ASSIGN_OR_RETURN(m.graph, r.Text("graph"));
  TESSEL_ASSIGN_OR_RETURN(m.graph_name, r.Text("graph_name"));
  TESSEL_ASSIGN_OR_RETURN(m.graph_hash, r.Text("graph_hash"));
  TESSEL_ASSIGN_OR_RETURN(m.nodes, r.Count("nodes"));
  TESSEL_ASSIGN_OR_RETURN(m.edges, r.Count("edges"));
  TESSEL_ASSIGN_OR_RETURN(m.relations, r.Count("relations"));
  TESSEL_ASSIGN_OR_RETURN(m.classes, r.Count("classes"));
  TESSEL_ASSIGN_OR_RETURN(m.feature_dim, r.Count("feature_dim"));
  TESSEL_ASSIGN_OR_RETURN(m.method, r.Text("method"));
  TESSEL_ASSIGN_OR_RETURN(int64_t parts, r.Count("parts"));
  if (parts < 1 || parts > std::numeric_limits<int32_t>::max())
    return r.Bad("parts", StrCat(parts, " is not a part count"));
  m.parts = static_cast<int32_t>(parts);
  TESSEL_ASSIGN_OR_RETURN(m.seed, r.Count("seed"));
  TESSEL_ASSIGN_OR_RETURN(m.edge_cut, r.Count("edge_cut"));
  TESSEL_ASSIGN_OR_RETURN(m.random_edge_cut, r.Count("random_edge_cut"));
  TESSEL_ASSIGN_OR_RETURN(m.constraints, r.Texts("constraints"));
  if (!doc.contains("imbalance") || !doc.at("imbalance").is_array() ||
      doc.at("imbalance").size() != m.constraints.size()) {
    return r.Bad("imbalance", StrCat("expected a list of ", m.constraints.size(), " numbers, one per constraint"));
  }
  for (const Json& v : doc.at("imbalance")) {
    if (!v.is_number()) return r.Bad("imbalance", "expected numbers");
    m.imbalance.push_back(v.get<double>());
  }
  TESSEL_ASSIGN_OR_RETURN(m.rebalance_moves, r.Count("rebalance_moves"));
  TESSEL_ASSIGN_OR_RETURN(m.seconds, r.Number("seconds"));
  TESSEL_ASSIGN_OR_RETURN(m.files, r.Texts("files"));
  if (!doc.contains("per_part") || !doc.at("per_part").is_array() ||
      doc.at("per_part").size() != static_cast<size_t>(m.parts)) {
    return r.Bad("per_part", StrCat("expected a list of ", m.parts, " parts (\"parts\" says ", m.parts, ")"));
  }
  for (size_t i = 0; i < doc.at("per_part").size(); ++i) {
    const Json& e = doc.at("per_part")[i];
    const std::string at = StrCat("per_part[", i, "].");
    if (!e.is_object()) return r.Bad(StrCat("per_part[", i, "]"), "expected an object");
    PartSizes s;
    TESSEL_ASSIGN_OR_RETURN(int64_t part, r.Count(e, "part", at));
    if (part != static_cast<int64_t>(i)) return r.Bad(at + "part", StrCat(part, ", expected ", i));
    s.part = static_cast<int32_t>(part);
    TESSEL_ASSIGN_OR_RETURN(s.file, r.Text(e, "file", at));
    if (s.file != StrCat("part-", i, ".h5"))
      return r.Bad(at + "file", StrCat("\"", s.file, "\", expected part-", i, ".h5"));
    if (std::find(m.files.begin(), m.files.end(), s.file) == m.files.end()) {
      return r.Bad("files", StrCat("does not list ", s.file));
    }
    TESSEL_ASSIGN_OR_RETURN(s.owned, r.Count(e, "owned", at));
    TESSEL_ASSIGN_OR_RETURN(s.halo, r.Count(e, "halo", at));
    TESSEL_ASSIGN_OR_RETURN(s.edges, r.Count(e, "edges", at));
    TESSEL_ASSIGN_OR_RETURN(s.pairs, r.Count(e, "pairs", at));
    TESSEL_ASSIGN_OR_RETURN(s.train, r.Count(e, "train", at));
    TESSEL_ASSIGN_OR_RETURN(s.features, r.Count(e, "features", at));
    m.per_part.push_back(std::move(s));
  }
  return m;
}

}  // namespace tessel::storage
