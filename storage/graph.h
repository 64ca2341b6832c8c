// HeteroGraph: the in-memory form of the HDF5 graph file of DESIGN.md ("Graph file").
// Global node ids concatenate the node types in file order: type t's node i is NodeOffset(t) + i.
// Thread safety: plain values. Failure: see each function.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace tessel::storage {

struct NodeType {
  std::string name;
  int64_t count = 0;
  int64_t feature_dim = 0;                               // 0 = no features
  std::vector<float> features;                           // [count * feature_dim] row-major, or empty
  std::vector<int64_t> labels;                           // [count] with -1 = unlabelled, or empty
  std::vector<uint8_t> train_mask, val_mask, test_mask;  // [count] 0/1 each, or empty
};

enum class RelationKind : int32_t { kBase = 0, kInverse = 1, kSelfLoop = 2 };

// The file's spelling of a kind: "base", "inverse", "self_loop".
std::string_view RelationKindName(RelationKind kind);

// The version written to /meta format_version; ReadGraph refuses any other.
inline constexpr int64_t kGraphFormatVersion = 1;

struct Relation {
  std::string name;
  int32_t src_type = 0;
  int32_t dst_type = 0;
  RelationKind kind = RelationKind::kBase;
  std::vector<int64_t> src;  // type-local ids of src_type
  std::vector<int64_t> dst;  // type-local ids of dst_type
};

struct HeteroGraph {
  std::string name;
  std::vector<NodeType> node_types;
  std::vector<Relation> relations;
  int64_t num_classes = 0;
  // Optional human-readable class names (e.g. the label IRIs of an RDF import): empty, or one per class.
  // Stored as the /meta attribute class_names when present.
  std::vector<std::string> class_names;
  // Where it came from: the importer's options and source sizes; used to tell whether a cache is stale.
  std::string source_fingerprint;

  int64_t num_nodes() const;
  int64_t num_edges() const;
  int64_t NodeOffset(int32_t type) const;
  // Checks every invariant (ids in range, sizes consistent, labels < num_classes, features finite).
  // kBadData on failure, naming the node type or relation and the offending index; a non-finite feature
  // is named by its dataset, node (type-local and global id) and column, in one pass over the features.
  Status Validate() const;
};

// Reads and validates a graph file. A missing, truncated or corrupt file, a missing dataset, an
// out-of-range id or a NaN/Inf feature is kBadData naming the file and the dataset. Features may be any
// float32 layout here; the feature store (feature_store.h) needs them contiguous and little-endian.
Result<HeteroGraph> ReadGraph(const std::string& path);
// Writes to "<path>.tmp-<pid>" and renames it into place, so a failure leaves no partial file.
// An invalid graph is refused with Validate()'s kBadData; I/O errors are kStorage.
// Layout: features are contiguous and 64-byte aligned (mappable in place); edge arrays of more than 64 Ki entries are
// chunked with shuffle + deflate.
Status WriteGraph(const HeteroGraph& graph, const std::string& path);

}  // namespace tessel::storage
