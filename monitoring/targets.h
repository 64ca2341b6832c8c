// The Prometheus file_sd targets file the coordinator writes, so that an operator's Prometheus finds every
// rank's exporter without editing its config (see monitoring/prometheus/prometheus.yml).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace tessel::monitoring {

// One rank's exporter, as Prometheus should scrape it.
struct Target {
  std::string host;  // an address Prometheus can reach (not a wildcard such as 0.0.0.0); IPv6 unbracketed
  int32_t port = 0;  // 1..65535
  int32_t rank = 0;
  std::string role;  // kRoleCoordinator | kRoleWorker | kRoleEmbedded
};

// Renders the file_sd JSON: one entry per target, sorted by rank, each
//   {"targets": ["HOST:PORT"], "labels": {"job": JOB, "rank": "R", "role": ROLE}}
// Fails (kUsage) on an empty job, an empty host or role, a port outside 1..65535, or two targets with the
// same rank. Any thread may call.
Result<std::string> FormatTargets(const std::string& job, const std::vector<Target>& targets);

// Writes FormatTargets() to `path`: to a temporary file beside it, fsynced, then renamed into place, so a
// Prometheus watching the file never reads half of it. Creates missing parent directories. The temporary
// name ("PATH.tmp.PID") does not match a "*.json" file_sd pattern.
// Failure: kUsage as FormatTargets; kStorage naming the path and the cause when a directory, the
// temporary file or the rename fails (the temporary file is removed). Threads: one writer per path.
Status WriteTargetsFile(const std::string& path, const std::string& job, const std::vector<Target>& targets);

}  // namespace tessel::monitoring
