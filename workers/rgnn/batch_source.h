// BatchSource: what an RGNN executor trains on (DESIGN.md "Executors": "adding a mode means a batch
// source"). A pass (a training epoch, or the final evaluation) is a sequence of batches; a batch is the
// graph each layer reads, the first layer's input and what the loss reads. The full-graph source
// (full_graph_source.h) gives one batch per pass, the whole partition, and exchanges halo rows between
// layers; the sampled source (sampled_source.h) gives mini-batches of sampled neighbourhoods.
//
// Every worker of a job gets the same number of batches in a pass (a batch may hold none of a worker's
// rows), so the executor's per-batch collectives match up.
// Ownership: a batch is owned by its source and valid until the next Next() or Begin().
// Thread safety: the training thread. Failure: kRankFailed from the exchanges; kBadData from the data.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/record.h"
#include "core/status.h"
#include "core/tensor.h"
#include "workers/rgnn/graph_view.h"

namespace tessel::workers {

struct Batch {
  // One view per layer. views[l + 1]->rows >= views[l]->owned; the executor's buffer between layers l
  // and l + 1 has views[l + 1]->rows rows, layer l writes the first views[l]->owned of them and
  // HaloForward fills the rest.
  std::vector<const GraphView*> views;
  const Tensor* features = nullptr;  // [views[0]->rows, F] with feature input; null with one-hot input
  // Over the last layer's output rows (views.back()->owned):
  const Tensor* labels = nullptr;                 // i64, -1 = unlabelled
  const Tensor* train_mask = nullptr;             // u8: the rows the training loss reads
  const Tensor* test_mask = nullptr;              // u8: the rows evaluation scores as test rows
  int64_t labelled_train = 0, labelled_test = 0;  // this worker's labelled rows under each mask
  // Labelled training rows of this step across all workers: the training loss is their mean.
  int64_t step_train_rows = 0;
  int64_t seeds = 0;  // output rows (0: the worker sits this batch out but joins its collectives)
};

// What a batch source has moved and measured: counts cumulative over the run, phase times this epoch's.
struct SourceFigures {
  bool sampled = false;  // which of the two groups below the source fills
  // Full-graph: the halo rows' bytes this worker sent to and received from its peers.
  int64_t halo_bytes_sent = 0, halo_bytes_received = 0;
  // Sampled: the input feature rows gathered from this worker's own store (local; of those, read
  // zero-copy by the GPU) and from other workers (remote), and one row's bytes.
  int64_t feature_rows_local = 0, feature_rows_remote = 0, feature_rows_zero_copy = 0, feature_row_bytes = 0;
  std::string feature_gather;  // "zero_copy" | "host"; "" when the model reads no input features
  std::string structure;       // "replicated" | "partitioned" (data.structure)
  bool prefetch = false;       // batches prepared on a second thread
  double sample_seconds = 0, layout_seconds = 0, feature_seconds = 0, feature_wait_seconds = 0;  // this epoch's
  // Both: the bytes of the worker's graph share as the layers read it (and the current batch).
  int64_t graph_bytes = 0;
};

class BatchSource {
 public:
  enum class Pass { kTrain, kEvaluate };
  virtual ~BatchSource() = default;

  // Starts a pass: training epoch `epoch` (1-based), or the evaluation of the test (and, where cheap,
  // the training) rows.
  virtual Status Begin(Pass pass, int64_t epoch) = 0;
  // The pass's next batch, or null at its end.
  virtual Result<const Batch*> Next() = 0;
  // full: the buffer between two layers, [views[l + 1]->rows, dim]; fills rows past views[l]->owned.
  virtual Status HaloForward(Tensor& full) = 0;
  // grad_full: its gradient; adds the gradients of rows past views[l]->owned into their owners' rows.
  virtual Status HaloBackward(Tensor& grad_full) = 0;
  // A streamed halo (train.halo = "streamed"): the batch's views hold the owned rows only, and every layer
  // also runs over each peer's block of its input rows, one round a peer, as the block arrives. Round k
  // (1 <= k <= halo_rounds()) has its view (input rows: the block; output rows: the owned ones). FetchRound
  // sends the rows of `owned` (a layer's input) that the peers read and receives round k's block into
  // `block` ([view rows, dim]); ReturnRound sends `dblock`, the block's gradients, back to its owner and
  // adds those the peers send for this worker's rows into `grad_owned`. Every worker runs every round.
  virtual int halo_rounds() const { return 0; }
  virtual const GraphView* RoundView(int k) const {
    (void)k;
    return nullptr;
  }
  virtual Status FetchRound(int k, const Tensor& owned, Tensor& block) {
    (void)k, (void)owned, (void)block;
    return InternalError("this batch source streams no halo");
  }
  virtual Status ReturnRound(int k, const Tensor& dblock, Tensor& grad_owned) {
    (void)k, (void)dblock, (void)grad_owned;
    return InternalError("this batch source streams no halo");
  }
  // What the source has moved so far, for summary.json and the metrics.
  virtual SourceFigures Figures() const = 0;
};

}  // namespace tessel::workers
