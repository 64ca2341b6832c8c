// `tessel inspect FILE.h5`: a readable summary of a graph file, or the object tree (groups, datasets
// with shapes, types and layout, the byte offset of contiguous data, and attributes) of any other HDF5
// file, e.g. spill or partition files, or of a graph file with `--tree`.
//
// Thread safety: plain functions. Failure: a file that is not HDF5, or a graph file that fails
// validation, is kBadData naming the file (and the dataset).
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "core/status.h"
#include "storage/graph.h"

namespace tessel::storage {

enum class InspectView {
  kSummary,  // a graph file's summary; the object tree of any other HDF5 file
  kTree,     // the object tree of any file, a graph file included (where its datasets lie, e.g.)
};

struct InspectOptions {
  int64_t max_relations = 40;  // relations listed individually in a graph summary; -1 = all
  InspectView view = InspectView::kSummary;
};

Status InspectFile(const std::string& path, const InspectOptions& options, std::ostream& out);

// The summary part for an in-memory graph; also printed after `import` and `generate`.
void PrintGraphSummary(const HeteroGraph& graph, const InspectOptions& options, std::ostream& out);

// 8285 -> "8,285".
std::string WithThousands(int64_t n);

}  // namespace tessel::storage
