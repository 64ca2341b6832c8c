// What the coordinator hands a worker: the settings every worker runtime needs (threads, device,
// plugins, budget, timeouts, metrics), and a payload for one executor, tagged by its kind. The job file
// is parsed and validated once, by the coordinator; workers receive these values, never the file.
//
// A planner (orchestrator/planners/) makes the payloads; the executor registry (executor_registry.h)
// decodes and consumes them. The worker runtime moves them around without knowing what is inside.
// Thread safety: values. Failure: Decode* fail their ByteReader on malformed bytes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/byte_io.h"
#include "core/logging.h"

namespace tessel::workers {

enum class DeviceRequest : int32_t { kAuto = 0, kCpu = 1, kCuda = 2 };
std::string_view DeviceRequestName(DeviceRequest request);

struct WorkerSettings {
  std::string job_name;
  uint64_t seed = 0;
  LogLevel log_level = LogLevel::kInfo;
  int32_t threads = 1;
  DeviceRequest device = DeviceRequest::kAuto;
  int64_t memory_budget_bytes = 0;  // 0 = unlimited
  std::vector<std::string> plugin_paths;
  std::vector<std::string> plugin_search_dirs;
  std::string metrics_bind = "127.0.0.1";
  int32_t metrics_port_base = 0;  // 0 = no exporter
  double heartbeat_interval_seconds = 1;
  double step_timeout_seconds = 600;
  double startup_timeout_seconds = 120;
  // Checkpoints: every `checkpoint_every_steps` steps (0 = never) each worker writes its shard under
  // `checkpoint_dir`. A resumed run loads its shard from `resume_step_dir` and continues after `resume_step`.
  std::string checkpoint_dir;
  int32_t checkpoint_every_steps = 0;
  std::string resume_step_dir;  // "" = a fresh start
  int64_t resume_step = 0;
  bool operator==(const WorkerSettings&) const = default;
};

void EncodeSettings(const WorkerSettings& settings, ByteWriter& out);
WorkerSettings DecodeSettings(ByteReader& in);

// One executor's share of the job. Subclasses carry what their executor needs (for full-graph RGNN
// training: the model settings and the worker's partition).
class AssignmentPayload {
 public:
  virtual ~AssignmentPayload() = default;
  // The executor kind that consumes it: the registry key, e.g. "rgnn.full".
  virtual std::string_view kind() const = 0;
  virtual void Encode(ByteWriter& out) const = 0;
  // A one-line description for logs ("partition 1 of 2: 4123 owned nodes, ...").
  virtual std::string Describe() const = 0;
};

}  // namespace tessel::workers
