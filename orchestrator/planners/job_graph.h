// Loads the graph a job trains on: reads an existing graph file, or imports/generates it on first use
// and caches it at [data] graph. The cache records a fingerprint of its sources (paths, sizes,
// modification times and import options) and is rebuilt when they change.
// Thread safety: reentrant. Failure: bad input data is kBadData naming the file; an unreadable cache
// directory only costs the cache (logged).
#pragma once

#include <string>

#include "core/logging.h"
#include "core/status.h"
#include "jobs/spec.h"
#include "storage/graph.h"

namespace tessel::orchestrator {

Result<storage::HeteroGraph> LoadJobGraph(const jobs::JobSpec& spec, const Logger& log);

// The fingerprint of [data]: equal fingerprints mean the same sources and options.
std::string DataFingerprint(const jobs::JobSpec& spec);

}  // namespace tessel::orchestrator
