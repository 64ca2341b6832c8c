// The host's table of the ops it calls and the exact signature it expects of each. A kernel registered
// for one of these ops must carry this schema (compared in canonical form) or its plugin is refused.
// The semantics of every op are documented in plugins/rgnn/rgnn_ops.h.
// Thread safety: immutable tables; any thread may call these.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "workers/plugin_host/schema.h"

namespace tessel::workers {

// The expected schema of `op`, or an empty view when the host does not know the op.
std::string_view ExpectedSchema(std::string_view op);

// Every op in the table, in table order.
const std::vector<std::string>& KnownOps();

// The ops an RGCN worker needs (forward, backward, loss and optimiser).
const std::vector<std::string>& RgcnOps();

// Per output of `op`: whether the caller may pass it with 0 rows to skip it. Empty for unknown ops.
std::vector<OutputRows> OutputRowsFor(std::string_view op);

}  // namespace tessel::workers
