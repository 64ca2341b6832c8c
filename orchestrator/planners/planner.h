// Planner: turns a validated job into one assignment per worker, with a predicted time and memory per
// worker (DESIGN.md "Executors"). There is one planner per kind of job: graph_planner (partition a graph
// for RGNN training) and stage_planner (split a GPT into pipeline stages). The coordinator and
// `tessel plan` reach them through MakePlanner and know nothing of what they plan.
//
// Ownership: a Plan owns its payloads; the coordinator moves each to its worker. Thread safety: one
// thread. Failure: kUsage for a plan that cannot fit (memory budget), kBadData for bad input data.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "core/logging.h"
#include "core/record.h"
#include "core/status.h"
#include "jobs/spec.h"
#include "monitoring/metrics.h"
#include "workers/assignment.h"

namespace tessel::orchestrator {

struct WorkerPlan {
  std::unique_ptr<workers::AssignmentPayload> payload;
  int64_t predicted_memory_bytes = 0;
  double predicted_step_seconds = 0;
  Record details;  // what `tessel plan` shows of the worker's share (rows, edges, ...)
};

struct Plan {
  std::vector<WorkerPlan> workers;  // one per worker, in worker order
  std::string step_unit;            // what a step is called ("epoch")
  int64_t num_steps = 0;
  Record summary;                  // facts merged into summary.json ("model", "graph", "partition", ...)
  std::vector<std::string> notes;  // lines the coordinator logs once the plan is made
};

class Planner {
 public:
  virtual ~Planner() = default;
  // Plans `spec` for `num_workers` workers. Refuses a plan that passes [resources] memory_budget_bytes.
  virtual Result<Plan> MakePlan(const jobs::JobSpec& spec, int32_t num_workers, const Logger& log) = 0;
  // What `tessel plan` prints: the split, and each worker's predicted time and memory.
  virtual void Print(const jobs::JobSpec& spec, const Plan& plan, std::ostream& out) const = 0;
  // The job's rules that its planner owns (an RGNN model's own), checked without the data: for `tessel
  // validate`, and first thing in MakePlan. kUsage naming each key's origin.
  virtual Status Check(const jobs::JobSpec&) const { return Status(); }
  // How long the job trains, for `tessel validate`: "50 epochs", "3000 steps, 2 stages".
  virtual std::string Length(const jobs::JobSpec& spec) const = 0;
  // Sets the coordinator's metrics that describe the plan (the partition's edge cut, ...).
  virtual void Publish(const Plan& plan, monitoring::Metrics& metrics) const = 0;
};

// "1.50 GiB", "12.0 MiB", "3.0 KiB": a byte count for plan tables.
std::string FormatBytes(int64_t bytes);

}  // namespace tessel::orchestrator
