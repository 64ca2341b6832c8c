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
#include "core/choices.h"
#include "core/fields.h"
#include "core/logging.h"

namespace tessel::workers {

// Checkpoints: every `checkpoint_every_steps` steps (0 = never) each worker writes its shard under
// `checkpoint_dir`. A resumed run loads its shard from `resume_step_dir` ("" = a fresh start) and
// continues after `resume_step`. memory_budget_bytes 0 = unlimited; metrics_port_base 0 = no exporter.
// The fields are declared once, in this list (core/fields.h), with no defaults: the coordinator's
// SettingsFor fills them from the validated job.
#define TESSEL_WORKER_SETTINGS_FIELDS(X)          \
  X(std::string, job_name)                        \
  X(uint64_t, seed)                               \
  X(LogLevel, log_level)                          \
  X(int32_t, threads)                             \
  X(DeviceChoice, device)                         \
  X(int64_t, memory_budget_bytes)                 \
  X(std::vector<std::string>, plugin_paths)       \
  X(std::vector<std::string>, plugin_search_dirs) \
  X(std::vector<std::string>, plugin_prefer)      \
  X(std::string, metrics_bind)                    \
  X(int32_t, metrics_port_base)                   \
  X(double, heartbeat_interval_seconds)           \
  X(double, step_timeout_seconds)                 \
  X(double, startup_timeout_seconds)              \
  X(std::string, checkpoint_dir)                  \
  X(int32_t, checkpoint_every_steps)              \
  X(BadLossAction, on_bad_loss)                   \
  X(double, bad_loss_factor)                      \
  X(int32_t, bad_loss_window)                     \
  X(int32_t, kernel_sample_every)                 \
  X(std::string, resume_step_dir)                 \
  X(int64_t, resume_step)
struct WorkerSettings {
  TESSEL_FIELDS(WorkerSettings, TESSEL_WORKER_SETTINGS_FIELDS)
};

inline void EncodeSettings(const WorkerSettings& settings, ByteWriter& out) { EncodeFields(settings, out); }
inline WorkerSettings DecodeSettings(ByteReader& in) {
  WorkerSettings s;
  DecodeFields(s, in, "settings");
  return s;
}

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
  // Every setting of the payload as key=value pairs, from its field list (core/fields.h), for the debug log.
  virtual std::string DescribeSettings() const = 0;
  // What sizes the payload's tensors, in the job file's words ("model.hidden = 64, model.layers = 2 and
  // this worker's partition: ..."): named by a refusal or an allocation failure (workers/worker.h).
  virtual std::string SizedBy() const = 0;
};

}  // namespace tessel::workers
