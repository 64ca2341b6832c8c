// RUN_DIR/metrics.csv: one row per step (an epoch for rgnn jobs) and worker rank, for `tessel report` and for
// anyone's spreadsheet. The worker fills a Record with the figures of kStepColumns (StepFigures in
// workers/worker.cc) and sends it with its progress; the coordinator appends the row.
//
// Thread safety: one writer per file. Failure: kStorage naming the file.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>

#include "core/record.h"
#include "core/status.h"

namespace tessel::monitoring {

// The columns after "rank" and "step", in order. Bytes and seconds are the step's own (differences of the
// running totals), except the two memory columns, which are the values at the step's end.
inline constexpr std::string_view kStepColumns[] = {
    "unix_seconds",            // when the step ended (Unix time)
    "step_seconds",            // wall time of the step
    "compute_seconds",         // step_seconds less peer_wait_seconds: what tells a straggler apart
    "peer_wait_seconds",       // blocked in communication with peers, the three below together
    "wait_allreduce_seconds",  // ... in sums of gradients and losses
    "wait_alltoall_seconds",   // ... in halo and remote feature exchanges
    "wait_p2p_seconds",        // ... in pipeline sends and receives
    "forward_seconds",
    "backward_seconds",
    "loss",
    "val_loss",  // empty unless the step validated
    "lr",
    "samples",  // the job's global batch (nodes or tokens)
    "gather_local_bytes",
    "gather_remote_bytes",
    "halo_sent_bytes",
    "halo_received_bytes",
    "pipeline_sent_bytes",
    "pipeline_received_bytes",
    "spill_written_bytes",
    "spill_read_bytes",
    "spill_wait_seconds",
    "resident_bytes",        // process resident memory
    "activation_bytes",      // saved activations held in memory
    "memory_weights_bytes",  // tessel_memory_bytes by kind (empty where the executor has none of it)
    "memory_gradients_bytes",
    "memory_optimizer_bytes",
    "memory_activations_bytes",
    "memory_workspace_bytes",
    "memory_graph_bytes",
};

class RunCsv {
 public:
  // Creates (or, on --resume, appends to) `path`, writing the header when the file is new or empty. Never
  // through a symbolic link (O_NOFOLLOW: kStorage naming it).
  static Result<RunCsv> Open(const std::string& path);
  // One row; a column missing from `figures` is left empty. Flushed, so a run that dies keeps its rows.
  Status Append(int32_t rank, int64_t step, const Record& figures);
  const std::string& path() const { return path_; }

 private:
  struct Close {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  std::string path_;
  std::unique_ptr<std::FILE, Close> out_;
};

}  // namespace tessel::monitoring
