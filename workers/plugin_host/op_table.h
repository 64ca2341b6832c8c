// The host's table of the ops it knows: every declaration of <tessel/ops/*.h>, the same headers the
// plugins build against, so a schema is never written twice. A kernel registered for one of these ops
// must carry the declared schema (compared in canonical form) and parameter size, or its plugin is
// refused. The semantics of every op are documented in its header.
// Thread safety: immutable tables; any thread may call these.
#pragma once

#include <tessel/ops/op.h>

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "workers/plugin_host/schema.h"

namespace tessel::workers {

// The declaration of `op`, or null when the host does not know the op.
const tessel_op_decl* FindOp(std::string_view op);

// Every declared op, in header order (nn, optim, rgnn, gather).
const std::vector<const tessel_op_decl*>& HostOps();

// The expected schema of `op`, or an empty view when the host does not know the op.
std::string_view ExpectedSchema(std::string_view op);

// Per output of `op`: whether the caller may pass it with 0 rows to skip it. Empty for unknown ops.
std::vector<OutputRows> OutputRowsFor(std::string_view op);

// The ops of a family ("nn", "optim", "rgnn", "gather": every op whose name starts with "family."). Empty when
// no op has that prefix.
std::vector<std::string> OpsOfFamily(std::string_view family);

}  // namespace tessel::workers
