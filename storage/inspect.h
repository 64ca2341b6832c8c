// `tessel inspect FILE.h5`: a readable summary of a graph file, or the object tree (groups, datasets
// with shapes, types and layout, and attributes) of any other HDF5 file, e.g. spill or partition files.
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

struct InspectOptions {
  int64_t max_relations = 40;  // relations listed individually in a graph summary; -1 = all
};

Status InspectFile(const std::string& path, const InspectOptions& options, std::ostream& out);

// The summary part for an in-memory graph; also printed after `import` and `generate`.
void PrintGraphSummary(const HeteroGraph& graph, const InspectOptions& options, std::ostream& out);

// 8285 -> "8,285".
std::string WithThousands(int64_t n);

}  // namespace tessel::storage
