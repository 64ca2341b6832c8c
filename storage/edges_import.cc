#include "storage/edges_import.h"

#include <algorithm>
#include <numeric>

#include "core/logging.h"
#include "storage/line_reader.h"

namespace tessel::storage {

int64_t TripleCollector::InternNode(std::string_view name) {
  auto it = nodes_.find(name);
  if (it != nodes_.end()) return it->second;
  const auto id = static_cast<int64_t>(node_names_.size());
  auto [pos, inserted] = nodes_.emplace(std::string(name), id);
  node_names_.push_back(&pos->first);
  return id;
}

int32_t TripleCollector::InternRelation(std::string_view name) {
  auto it = relations_.find(name);
  if (it != relations_.end()) return it->second;
  const auto id = static_cast<int32_t>(relation_names_.size());
  relations_.emplace(std::string(name), id);
  relation_names_.emplace_back(name);
  return id;
}

int64_t TripleCollector::FindNode(std::string_view name) const {
  auto it = nodes_.find(name);
  return it == nodes_.end() ? -1 : it->second;
}

HeteroGraph TripleCollector::Build(const BuildOptions& options) {
  // Relations sorted by name, so the relation order does not depend on the order of the input lines.
  const auto num_rel = static_cast<int32_t>(relation_names_.size());
  std::vector<int32_t> by_name(num_rel);
  std::iota(by_name.begin(), by_name.end(), 0);
  std::sort(by_name.begin(), by_name.end(),
            [&](int32_t a, int32_t b) { return relation_names_[a] < relation_names_[b]; });
  std::vector<int32_t> rank(num_rel);
  for (int32_t i = 0; i < num_rel; ++i) rank[by_name[i]] = i;
  for (auto& t : triples_) t.rel = rank[t.rel];
  std::sort(triples_.begin(), triples_.end(), [](const Triple& a, const Triple& b) {
    if (a.rel != b.rel) return a.rel < b.rel;
    if (a.src != b.src) return a.src < b.src;
    return a.dst < b.dst;
  });
  triples_.erase(
      std::unique(triples_.begin(), triples_.end(),
                  [](const Triple& a, const Triple& b) { return a.rel == b.rel && a.src == b.src && a.dst == b.dst; }),
      triples_.end());

  HeteroGraph g;
  NodeType& entity = g.node_types.emplace_back();
  entity.name = std::string(kEntityType);
  entity.count = num_nodes();
  g.relations.resize(num_rel);
  for (int32_t r = 0; r < num_rel; ++r) {
    g.relations[r].name = relation_names_[by_name[r]];
    g.relations[r].kind = RelationKind::kBase;
  }
  size_t begin = 0;
  for (int32_t r = 0; r < num_rel; ++r) {
    size_t end = begin;
    while (end < triples_.size() && triples_[end].rel == r) ++end;
    Relation& rel = g.relations[r];
    rel.src.reserve(end - begin);
    rel.dst.reserve(end - begin);
    for (size_t i = begin; i < end; ++i) {
      rel.src.push_back(triples_[i].src);
      rel.dst.push_back(triples_[i].dst);
    }
    begin = end;
  }
  std::vector<Triple>().swap(triples_);
  AddDerivedRelations(g, options.add_inverse, options.add_self_loop);
  return g;
}

std::vector<Relation> DerivedRelationHeads(const HeteroGraph& g, bool add_inverse, bool add_self_loop) {
  std::vector<Relation> heads;
  if (add_inverse) {
    for (const Relation& b : g.relations) {
      Relation& inv = heads.emplace_back();
      inv.name = StrCat(b.name, kInverseSuffix);
      inv.kind = RelationKind::kInverse;
      inv.src_type = b.dst_type;
      inv.dst_type = b.src_type;
    }
  }
  if (add_self_loop) {
    const size_t types = g.node_types.size();
    for (size_t t = 0; t < types; ++t) {
      Relation& self = heads.emplace_back();
      self.name = types == 1 ? std::string(kSelfLoopName) : StrCat(kSelfLoopName, ":", g.node_types[t].name);
      self.kind = RelationKind::kSelfLoop;
      self.src_type = self.dst_type = static_cast<int32_t>(t);
    }
  }
  return heads;
}

void AddDerivedRelations(HeteroGraph& g, bool add_inverse, bool add_self_loop) {
  const size_t base = g.relations.size();
  std::vector<Relation> heads = DerivedRelationHeads(g, add_inverse, add_self_loop);
  g.relations.reserve(base + heads.size());
  for (Relation& d : heads) {
    if (d.kind == RelationKind::kInverse) {
      const Relation& b = g.relations[g.relations.size() - base];
      d.src = b.dst;
      d.dst = b.src;
    } else {
      d.src.resize(static_cast<size_t>(g.node_types[static_cast<size_t>(d.src_type)].count));
      std::iota(d.src.begin(), d.src.end(), int64_t{0});
      d.dst = d.src;
    }
    g.relations.push_back(std::move(d));
  }
}

std::string StemOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  const size_t dot = base.find('.');
  if (dot != std::string::npos && dot > 0) base.resize(dot);
  return base;
}

Result<HeteroGraph> ImportEdges(const EdgesImportOptions& options) {
  if (options.inputs.empty()) return UsageError("import edges: no --input given");
  TripleCollector collector;
  TextInputOptions text;
  text.members = options.members;
  for (const auto& input : options.inputs) {
    TESSEL_RETURN_IF_ERROR(
        ForEachLine(input, text, [&](const std::string& source, int64_t line_no, std::string_view line) -> Status {
          if (line.find_first_not_of(" \t") == std::string_view::npos) return Status::Ok();
          std::string_view fields[3];
          size_t n = 0, pos = 0;
          while (true) {
            const size_t tab = line.find('\t', pos);
            const std::string_view field = line.substr(pos, tab == std::string_view::npos ? tab : tab - pos);
            if (n < 3) fields[n] = field;
            ++n;
            if (tab == std::string_view::npos) break;
            pos = tab + 1;
          }
          if (n != 3) {
            return BadDataError(StrCat(source, ":", line_no, ": expected head<TAB>relation<TAB>tail, found ", n,
                                       n == 1 ? " field" : " fields"));
          }
          for (size_t i = 0; i < 3; ++i) {
            if (fields[i].empty()) return BadDataError(StrCat(source, ":", line_no, ": empty field ", i + 1));
          }
          const int64_t head = collector.InternNode(fields[0]);
          const int32_t rel = collector.InternRelation(fields[1]);
          const int64_t tail = collector.InternNode(fields[2]);
          collector.Add(head, rel, tail);
          return Status::Ok();
        }));
  }
  if (collector.num_triples_added() == 0) {
    return BadDataError(StrCat(options.inputs.front(), ": no edges found"));
  }
  HeteroGraph g = collector.Build({options.add_inverse, options.add_self_loop});
  g.name = options.name.empty() ? StemOf(options.inputs.front()) : options.name;
  std::string fp = "tessel-import-edges v1";
  for (const auto& input : options.inputs) fp += StrCat("; input=", DescribeSourceFile(input));
  for (const auto& m : options.members) fp += StrCat("; member=", m);
  fp += StrCat("; inverse=", options.add_inverse ? 1 : 0, "; self_loop=", options.add_self_loop ? 1 : 0,
               "; name=", g.name);
  g.source_fingerprint = std::move(fp);
  return g;
}

}  // namespace tessel::storage
