// The executor registry: every kind of assignment a worker can run, keyed by the payload's kind tag.
// It is the one place that lists the built-in executors; the worker runtime, the protocol and the
// coordinator only pass kinds and bytes through it.
// Thread safety: immutable tables; any thread.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "core/byte_io.h"
#include "core/status.h"
#include "workers/assignment.h"
#include "workers/executor.h"

namespace tessel::workers {

// The factory for `kind`, or a kInternal error naming the known kinds (ranks running different builds).
Result<const ExecutorFactory*> FindExecutor(std::string_view kind);

// Every registered factory, for tools and tests.
const std::vector<ExecutorFactory>& Executors();

}  // namespace tessel::workers
