// Executor: the one seam every kind of training plugs into (DESIGN.md "Executors"). A worker builds one
// executor from its assignment and runs it; the worker runtime, the protocol and the coordinator know
// nothing about what it trains. The RGNN executors (full graph, sampled) live in workers/rgnn/, the GPT
// pipeline stage in workers/llm/.
//
//   TESSEL_ASSIGN_OR_RETURN(auto executor, factory->build(std::move(payload), context));
//   for (int64_t step = 1; step <= executor->num_steps(); ++step) {
//     TESSEL_ASSIGN_OR_RETURN(StepResult r, executor->Step(step));
//   }
//   TESSEL_ASSIGN_OR_RETURN(Record result, executor->Evaluate());
//
// Ownership: an executor borrows everything in its ExecutorContext (the worker owns it and keeps it alive
// longer than the executor). Thread safety: one thread drives an executor. Failure: every method returns
// a Status; the worker reports it to the coordinator, which ends the job with its exit code.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "core/allocator.h"
#include "core/byte_io.h"
#include "core/logging.h"
#include "core/record.h"
#include "core/status.h"
#include "core/tensor.h"
#include "core/thread_pool.h"
#include "monitoring/metrics.h"
#include "storage/spill_store.h"
#include "workers/assignment.h"
#include "workers/comm/comm.h"
#include "workers/plugin_host/kernel_registry.h"

namespace tessel::workers {

// Where an executor computes: the device its tensors live on and how to allocate and queue there.
struct DeviceContext {
  Device device = Device::kCpu;
  int32_t ordinal = 0;
  void* stream = nullptr;                   // cudaStream_t on CUDA: every kernel of the executor queues here
  Allocator* allocator = &HostAllocator();  // device memory for the executor's tensors
};

// What an executor computes with. Every pointer is owned by the worker and outlives the executor.
struct ExecutorContext {
  WorkerComm* comm = nullptr;               // collectives among the workers of the job (host memory)
  DeviceComm* device_comm = nullptr;        // sums of buffers on `device` (MPI on CPU, NCCL on GPU)
  ThreadPool* pool = nullptr;               // the worker's CPU threads
  const KernelRegistry* kernels = nullptr;  // the loaded plugins
  DeviceContext device;
  MemoryBudget* budget = nullptr;          // charged for kernel workspaces; null = unlimited
  KernelTimer* kernel_timer = nullptr;     // times the kernels of sampled steps; null = never
  monitoring::Metrics* metrics = nullptr;  // null when the rank exports none
  const Logger* log = nullptr;
  uint64_t seed = 0;                  // the job's seed
  std::string run_dir;                // the run's output directory ("" = none, e.g. in tests)
  double step_timeout_seconds = 600;  // [timeouts] step_seconds: the longest wait on a peer
  // Opens the worker's spill store; empty = storage::SpillStore::Open (tests pass memory and faulty files).
  std::function<Result<std::unique_ptr<storage::SpillStore>>(const storage::SpillOptions&)> open_spill;
};

// One step's outcome. `loss` is averaged over all workers (the same on every worker).
struct StepResult {
  double loss = 0;
  double lr = 0;        // the learning rate this step used
  int64_t samples = 0;  // the job's global batch this step, in samples_kind units (the same on every worker)
  std::string_view samples_kind = "samples";  // "nodes" (labelled training nodes, rgnn) or "tokens" (llm)
  // The step's compute phases (seconds; -1 = not measured): the metrics' histograms, metrics.csv and
  // summary.json's per-step arrays.
  double forward_seconds = -1, backward_seconds = -1;
  std::optional<double> val_loss;  // when the step validated
  Record shown;                    // more small figures for progress lines (train_accuracy, ...)
  Record timings;                  // more per-step arrays for summary.json (wait_seconds, ...)
};

// Where SaveState writes and LoadState reads: named host tensors (a checkpoint shard, or memory).
class StateWriter {
 public:
  virtual ~StateWriter() = default;
  // `tensor` is in host memory; the writer copies what it keeps.
  virtual Status Write(std::string_view name, const Tensor& tensor) = 0;
};
class StateReader {
 public:
  virtual ~StateReader() = default;
  // The tensor saved under `name`, in host memory; kStorage when there is none.
  virtual Result<Tensor> Read(std::string_view name) = 0;
};

// Bytes an executor holds now, by what they are for (tessel_memory_bytes{kind}, metrics.csv); -1 where it
// has none of that kind or does not know. The worker runtime adds the kernel workspaces (its MemoryBudget).
struct MemoryUse {
  int64_t weights = -1;      // the parameters (and a reduced-precision working copy of them)
  int64_t gradients = -1;    // their gradients
  int64_t optimizer = -1;    // the optimizer's state (Adam's or AdamW's moments)
  int64_t activations = -1;  // what the forward keeps for the backward, and the layer outputs
  int64_t graph = -1;        // the worker's share of the graph: node features, labels, masks
};

class Executor {
 public:
  virtual ~Executor() = default;

  // What the executor holds now, by kind (called after each step; cheap: sizes only).
  virtual MemoryUse Memory() const { return {}; }

  // What a step is called in progress lines and summary.json ("epoch" for full-graph training, so the
  // per-step arrays are epoch_loss, epoch_seconds, ...).
  virtual std::string_view step_unit() const = 0;
  virtual int64_t num_steps() const = 0;

  // Runs step `step` (1-based, increasing): forward, loss, backward, gradient sum, optimizer update.
  virtual Result<StepResult> Step(int64_t step) = 0;

  // The final figures, merged into summary.json as they are (test_accuracy, ...).
  virtual Result<Record> Evaluate() = 0;

  // Everything training needs to continue exactly where it stopped: parameters, optimizer state, step.
  virtual Status SaveState(StateWriter& out) const = 0;
  virtual Status LoadState(StateReader& in) = 0;
};

// A StateWriter and StateReader over memory: for tests, and for copying state between executors.
class MemoryState final : public StateWriter, public StateReader {
 public:
  Status Write(std::string_view name, const Tensor& tensor) override;
  Result<Tensor> Read(std::string_view name) override;

 private:
  std::vector<std::pair<std::string, Tensor>> tensors_;
};

// How the worker runtime makes an executor of one kind from its payload's bytes. Each executor exports
// its factory (RgnnFullGraphFactory(), LlmStageFactory(), ...); executor_registry.cc lists them.
struct ExecutorFactory {
  std::string_view kind;
  // Decodes a payload that AssignmentPayload::Encode wrote (bad bytes fail the reader).
  std::unique_ptr<AssignmentPayload> (*decode)(ByteReader& in);
  // Builds the executor on the context's device; checks the plugins provide every op it needs first.
  Result<std::unique_ptr<Executor>> (*build)(std::unique_ptr<AssignmentPayload> payload,
                                             const ExecutorContext& context);
};

}  // namespace tessel::workers
