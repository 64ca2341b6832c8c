// Importing knowledge-graph triples: the TSV edge-list importer (`tessel import edges`) and the
// TripleCollector that both it and the RDF importer build their graphs with.
//
// Graphs built here have one node type, "entity", no features, and relations in this order:
//   1. base relations, one per distinct relation name, sorted by name; duplicate triples counted once,
//      edges sorted by (src, dst);
//   2. with inverse edges: for each base relation R, "R^-1" (kind inverse) with src and dst swapped;
//   3. with self-loops: one relation "self_loop" (kind self_loop) with an edge i -> i for every node.
// Node ids follow first appearance in the input (archive members in sorted name order).
//
// Thread safety: plain functions and values. Failure: kBadData names the file and line.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "storage/graph.h"

namespace tessel::storage {

inline constexpr std::string_view kEntityType = "entity";

// The derived relations every importer and the generator can add, named and ordered alike: after the
// base relations, one inverse "R^-1" (kind inverse, src and dst swapped) per base relation R, in order;
// then one self-loop relation per node type, i -> i for every node, named "self_loop" in a one-type graph
// and "self_loop:<type>" otherwise.
inline constexpr std::string_view kInverseSuffix = "^-1";
inline constexpr std::string_view kSelfLoopName = "self_loop";
void AddDerivedRelations(HeteroGraph& graph, bool add_inverse, bool add_self_loop);
// Those relations without their edges (name, kind, types), in the same order: what a reader that holds
// only a share of the edges (the distributed partitioner) fills itself.
std::vector<Relation> DerivedRelationHeads(const HeteroGraph& graph, bool add_inverse, bool add_self_loop);

struct EdgesImportOptions {
  std::vector<std::string> inputs;   // plain, .gz or tar(.gz) files of head<TAB>relation<TAB>tail lines
  std::vector<std::string> members;  // archive members to read; empty = every *.txt / *.tsv member
  bool add_inverse = false;
  bool add_self_loop = false;
  std::string name;  // graph name; empty = the first input's base name without extensions
};

// Reads every input and builds the graph. A line without exactly three non-empty tab-separated
// fields is kBadData "file:LINE: ...". Nothing is written to disk.
Result<HeteroGraph> ImportEdges(const EdgesImportOptions& options);

// Collects (subject, relation, object) triples by name and builds a one-type graph from them.
// Not thread-safe; one collector per import.
class TripleCollector {
 public:
  // Returns the id of `name`, adding it when new. Ids are dense, in order of first appearance.
  int64_t InternNode(std::string_view name);
  int32_t InternRelation(std::string_view name);
  void Add(int64_t subject, int32_t relation, int64_t object) { triples_.push_back({subject, object, relation}); }
  // The id of a node, or -1 when absent.
  int64_t FindNode(std::string_view name) const;
  int64_t num_nodes() const { return static_cast<int64_t>(node_names_.size()); }
  int64_t num_triples_added() const { return static_cast<int64_t>(triples_.size()); }

  // Builds the graph described in the file comment; consumes the collected triples.
  struct BuildOptions {
    bool add_inverse = false;
    bool add_self_loop = false;
  };
  HeteroGraph Build(const BuildOptions& options);

 private:
  struct Triple {
    int64_t src;
    int64_t dst;
    int32_t rel;
  };
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, int64_t, Hash, std::equal_to<>> nodes_;
  std::vector<const std::string*> node_names_;
  std::unordered_map<std::string, int32_t, Hash, std::equal_to<>> relations_;
  std::vector<std::string> relation_names_;
  std::vector<Triple> triples_;
};

// "dir/FB15k-237.tar.gz" -> "FB15k-237": the base name up to its first dot (whole name if none).
std::string StemOf(const std::string& path);

}  // namespace tessel::storage
