// DGL's chunked graph format (the input of DistDGL's distributed partitioning pipeline and GraphStorm's
// gconstruct output): a directory whose metadata.json names the node types, the edge types
// ("src:rel:dst"), the number of nodes and edges of each (per chunk, "num_nodes_per_chunk" /
// "num_edges_per_chunk", or per type, "num_nodes_per_type" / "num_edges_per_type"), and the chunk files:
//   "edges":     {etype: {"format": {"name": "csv", "delimiter": " "} or {"name": "numpy"}, "data": [paths]}}
//                CSV chunks hold one "src<delim>dst" line per edge, type-local ids (plain or compressed);
//                NumPy chunks are [E, 2] integer arrays;
//   "node_data": {ntype: {key: {"format": {"name": "numpy"}, "data": [paths]}}}, rows concatenated in order;
//   "edge_data": edge features (Tessel trains none: listed as ignored).
// Paths are relative to the directory or absolute. Parquet chunks are refused (no Debian library reads
// them here): convert them to NumPy or CSV.
//
// ReadChunkedMetadata reads and checks metadata.json alone; the chunk readers read one chunk each, so a
// rank can read only its share. ImportChunked reads everything into a HeteroGraph for `tessel import
// chunked`: node types in metadata order; one relation per edge type, in metadata order, named by its
// relation when that name is unique and "src:rel:dst" otherwise, edges in file order (duplicates kept);
// then, when asked, an inverse relation per base relation and a self-loop relation per node type, as
// `tessel generate graph` makes them.
//
// Failure: kBadData naming the file (metadata.json with the key, or the chunk with the line or element)
// and the cause: a missing or malformed key, an unknown node type in an edge type, chunk counts or sizes
// that disagree with metadata.json, an id out of range, a label or mask of the wrong length or value.
// kStorage for OS read errors. Nothing is written.
//
// Thread safety: plain functions and values.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "storage/graph.h"

namespace tessel::storage {

// One array's chunk files and their format.
struct ChunkFiles {
  std::string format;              // "csv" or "numpy"
  char delimiter = ',';            // CSV only
  std::vector<std::string> paths;  // resolved against the directory
};

struct ChunkedNodeData {
  std::string key;  // e.g. "feat", "label", "train_mask"
  ChunkFiles files;
};

struct ChunkedNodeType {
  std::string name;
  int64_t count = 0;
  std::vector<int64_t> chunk_counts;  // empty when metadata.json gave only the total
  std::vector<ChunkedNodeData> data;
};

struct ChunkedEdgeType {
  std::string canonical;  // "src:rel:dst" as written
  std::string relation;   // "rel"
  int32_t src_type = 0, dst_type = 0;
  int64_t count = 0;
  std::vector<int64_t> chunk_counts;  // one per chunk file, or empty (only the total was given)
  ChunkFiles files;
  std::vector<std::string> data_keys;  // edge_data keys (ignored by the importer)
};

struct ChunkedGraph {
  std::string dir;
  std::string metadata_path;
  std::string graph_name;
  std::vector<ChunkedNodeType> node_types;
  std::vector<ChunkedEdgeType> edge_types;
};

Result<ChunkedGraph> ReadChunkedMetadata(const std::string& dir);

// Appends chunk `chunk` of edge type `e` to *src / *dst (type-local ids, checked against the node counts
// and, when metadata.json gave per-chunk counts, the chunk's size).
Status ReadEdgeChunk(const ChunkedGraph& g, int32_t e, int32_t chunk, std::vector<int64_t>* src,
                     std::vector<int64_t>* dst);

struct ChunkedImportOptions {
  std::string dir;  // holds metadata.json
  // The node_data keys read as features (float32, [count, dim]), labels (integers, -1 = unlabelled) and
  // the split masks (0/1). A node type without the key has none of it.
  std::string features = "feat";
  std::string labels = "label";
  std::string train_mask = "train_mask";
  std::string val_mask = "val_mask";
  std::string test_mask = "test_mask";
  bool add_inverse = false;
  bool add_self_loop = false;
  std::string name;  // graph name; empty = metadata.json's graph_name
};

struct ChunkedImport {
  HeteroGraph graph;
  std::vector<std::string> ignored;  // "paper/year", "author:writes:paper/weight": data the graph has no place for
};

Result<ChunkedImport> ImportChunked(const ChunkedImportOptions& options);

// What a reader of a share needs, each read as ImportChunked reads it:
// the features and supervision of rows [first, first + count) of node type `t` (empty vectors for an
// absent key; feature_dim from the chunks' headers, so any share agrees on it), or only one of the two
// (the distributed partitioner reads the supervision first and streams the features later);
struct ChunkedNodeRows {
  std::vector<float> features;  // [count * feature_dim]
  int64_t feature_dim = 0;
  std::vector<int64_t> labels;
  std::vector<uint8_t> train_mask, val_mask, test_mask;
};
enum class NodeColumns { kAll, kSupervision, kFeatures };
Result<ChunkedNodeRows> ReadNodeRows(const ChunkedGraph& g, const ChunkedImportOptions& options, int32_t t,
                                     int64_t first, int64_t count, NodeColumns columns = NodeColumns::kAll);
// the graph's shape without data: node types (name, count) and relations (names, kinds, types) in
// ImportChunked's order, the derived ones included when asked, and no edges;
HeteroGraph ChunkedSkeleton(const ChunkedGraph& g, bool add_inverse, bool add_self_loop);
// the data the graph has no place for ("paper/year", "author:writes:paper/weight").
std::vector<std::string> IgnoredChunkedData(const ChunkedGraph& g, const ChunkedImportOptions& options);

}  // namespace tessel::storage
