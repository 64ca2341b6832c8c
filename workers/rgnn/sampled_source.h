// SampledSource: the batch source of sampled mini-batch training ("rgnn.sampled" assignments).
//
// A training epoch shuffles the labelled training nodes of the whole graph with a key made from the job
// seed and the epoch, and cuts them into global batches of `batch_size`; each worker trains on the seeds
// of a global batch that it owns (so every worker runs the same number of batches, and a batch's loss is
// a mean over the whole global batch). Its seeds' neighbourhoods are sampled (sampler.h), one block per
// layer, from the replicated structure or, partitioned, with the neighbours of other workers' nodes
// drawn by their owners (then the labelled nodes of the whole graph are gathered from every worker's
// part once, at the start); each block becomes a GraphView in the kernels' layouts. The first layer's input rows are
// read from the worker's feature store when it owns them and fetched from their owners in one batched exchange per
// batch otherwise (AllToAll of ids, AllToAllV of rows); one-hot input needs no rows at all. Evaluation runs the
// labelled test nodes the same way, with the job's evaluation fanouts (every neighbour by default).
//
// Prefetch: a second thread prepares batch k+1 (sampling, layouts, feature rows and their exchange, over
// a duplicated communicator) while batch k trains; `feature_wait_seconds` is the time the training
// thread then spends blocked on it. Without MPI_THREAD_MULTIPLE the source prepares batches in line.
//
// Zero-copy (data.feature_gather, on a GPU worker whose rows are in the pinned store): the worker does
// not gather its own rows on the host and copy the batch up; the GPU reads them from the pinned store
// through its device pointer with gather.rows (AssembleFeatureRows), on the prefetch thread's own
// stream, so the read overlaps the previous batch's compute. Rows from other workers still arrive
// through the host exchange. `feature_rows_zero_copy` counts the rows read that way.
//
// Ownership: owns the sampling structure, the feature store and the prepared batches; borrows the
// ExecutorContext's communicator. Thread safety: the training thread calls every method; the prefetch
// thread touches only what Prepare() reads (immutable during a pass) and its own communicator.
// Failure: kBadData for a feature row a worker does not own (naming the rank), kRankFailed from the
// exchange.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "core/cuda_device.h"
#include "storage/feature_store.h"
#include "workers/executor.h"
#include "workers/plugin_host/kernel.h"
#include "workers/rgnn/batch_source.h"
#include "workers/rgnn/part_structure.h"
#include "workers/rgnn/rgnn_settings.h"
#include "workers/rgnn/sampler.h"

namespace tessel::workers {

// The feature rows a worker owns, by global node id.
class RowStore {
 public:
  virtual ~RowStore() = default;
  virtual int64_t dim() const = 0;
  // out[i] = row ids[i] ([ids.size(), dim]); kBadData naming the id (and `rank`) when it is not owned.
  virtual Status Gather(std::span<const int64_t> ids, float* out, int32_t rank) const = 0;
  // Row ids[k] straight into out + at[k] * dim(): into its place in the batch, with no staging copy.
  virtual Status GatherAt(std::span<const int64_t> ids, std::span<const int64_t> at, float* out, int32_t rank) const;
};

// Rows held in memory, found by binary search over their node ids (no array over the whole graph).
class MemoryRowStore final : public RowStore {
 public:
  // rows[i] ([dim]) is node ids[i]'s, in any order.
  MemoryRowStore(std::vector<int64_t> ids, std::vector<float> rows, int64_t dim);
  int64_t dim() const override { return dim_; }
  Status Gather(std::span<const int64_t> ids, float* out, int32_t rank) const override;
  Status GatherAt(std::span<const int64_t> ids, std::span<const int64_t> at, float* out, int32_t rank) const override;

 private:
  const float* Row(int64_t id) const;  // or null
  std::vector<int64_t> ids_;           // ascending
  std::vector<float> rows_;
  int64_t dim_;
};

// Where each feature row of a batch comes from, once the exchange is done (ExchangeFeatureRows).
struct FeatureRowSources {
  std::vector<int64_t> local_ids, local_at;  // the rows this worker serves: node ids, and their batch positions
  std::vector<int64_t> remote_at;            // the batch position of each received row, in the order received
  std::vector<float> received;               // [>= remote_at.size(), dim]: the rows their owners sent
};

// The collective half of FetchFeatureRows: sorts `ids` into rows this worker serves and rows it asks
// their owners for, serves its peers' requests from `store`, and receives its own into
// sources->received. Nothing is read for the local rows. Collective over `comm`, with the same failure
// rules as FetchFeatureRows.
Status ExchangeFeatureRows(const RowStore& store, std::span<const int32_t> owners, int32_t rank,
                           const std::vector<int64_t>& ids, WorkerComm& comm, FeatureRowSources* sources);

// Device scratch for AssembleFeatureRows, grown as needed and reused from batch to batch by one thread.
struct RowAssembly {
  Tensor ids, stage;
};

// A batch's feature rows [rows, dim] into `out`, on `device`, with `gather` (gather.rows of that device):
// local row k is row table_rows[k] of `table` (on the GPU: the pinned store through its device pointer,
// so the GPU reads just those rows in place, PyTorch-Direct's zero-copy gather), for position
// sources.local_at[k]; received row j is for position sources.remote_at[j]. When every row is local and
// in batch order (one worker) that is one gather into `out`; otherwise the local rows and the received
// ones are staged on the device first and put in place by a second gather, device to device. Queued on
// device.stream and waited for: `out` is complete on return. kInternal when the sources do not cover
// the batch exactly once; a gather's own errors as they come.
Status AssembleFeatureRows(const Kernel& gather, const Tensor& table, std::span<const int64_t> table_rows,
                           const FeatureRowSources& sources, const DeviceContext& device, RowAssembly* scratch,
                           Tensor& out);

// out[i] = the feature row of global node ids[i] ([ids.size(), store.dim()]), which worker owners[i]
// owns: rows `rank` owns from `store`, the others from their owners in one exchange (AllToAll of ids, AllToAllV of
// rows). Collective over `comm`: every worker calls it, with its own ids (possibly none), and every worker completes
// the exchange even when its own ids or a peer's request are bad (kBadData naming the rank, returned afterwards), so a
// bad id never leaves the others waiting. Adds the rows read locally and received to *local and *remote.
Status FetchFeatureRows(const RowStore& store, std::span<const int32_t> owners, int32_t rank,
                        const std::vector<int64_t>& ids, float* out, WorkerComm& comm, int64_t* local, int64_t* remote);

// Rows read from the graph file (storage/feature_store.h): mapped in place, or loaded into (pinned)
// memory. Contiguous gathers (the rows a peer asked for) go through the gather plugin's gather.rows
// (libtessel_gather.so: prefetched, streaming stores) when `gather` is given, one call per feature
// table, run on the calling thread; rows gathered into their batch positions are copied with prefetch.
class FileRowStore final : public RowStore {
 public:
  explicit FileRowStore(storage::FeatureStore store, const Kernel* gather = nullptr)
      : store_(std::move(store)), gather_(gather) {}
  int64_t dim() const override { return store_.feature_dim(); }
  Status Gather(std::span<const int64_t> ids, float* out, int32_t rank) const override;
  Status GatherAt(std::span<const int64_t> ids, std::span<const int64_t> at, float* out, int32_t rank) const override;
  const storage::FeatureStore& store() const { return store_; }

 private:
  storage::FeatureStore store_;
  const Kernel* gather_;  // gather.rows on CPU, or null
};

class SampledSource final : public BatchSource {
 public:
  static Result<std::unique_ptr<SampledSource>> Build(RgnnSampledAssignment assignment, std::unique_ptr<RowStore> store,
                                                      const ExecutorContext& context);
  ~SampledSource() override;

  // The relation and node-type counts the layers are made for (no rows, no edges).
  const GraphView& shape_view() const { return shape_view_; }
  int64_t input_dim() const;
  int64_t num_classes() const;
  bool prefetching() const { return prefetch_thread_.joinable(); }

  Status Begin(Pass pass, int64_t epoch) override;
  Result<const Batch*> Next() override;
  Status HaloForward(Tensor&) override { return Status(); }  // a block's input rows are all there
  Status HaloBackward(Tensor&) override { return Status(); }
  // Cumulative: feature_rows_local, feature_rows_remote, feature_bytes_local, feature_bytes_remote,
  // feature_rows_zero_copy and feature_bytes_zero_copy (the local rows the GPU read in place), and
  // feature_gather ("zero_copy" or "host", as resolved); for the epoch just
  // trained (per-step arrays in summary.json): step_sample_seconds, step_layout_seconds,
  // step_feature_seconds (gather + exchange, wherever it ran), step_feature_wait_seconds.
  SourceFigures Figures() const override;

 private:
  struct Prepared;
  SampledSource(RgnnSampledAssignment assignment, std::unique_ptr<RowStore> store, const ExecutorContext& context);
  // Everything batch `index` of the current pass needs: on the host, except zero-copy feature rows,
  // which are read onto the device on `stream` (a cudaStream_t).
  Status Prepare(int64_t index, WorkerComm& comm, void* stream, Prepared* out);
  // Resolves sampling_.gather: sets device_gather_ and device_table_ where zero-copy runs; kUsage when it
  // was asked for ("zero_copy") and cannot run here.
  Status SetUpZeroCopy();
  Status Upload(Prepared* p);  // to the executor's device (a no-op on CPU)
  void PrefetchLoop();
  // Memory for a batch's feature rows (the device's with zero-copy, else the host's): a spare one when
  // big enough (the training thread gives a batch's back once it is done with it), else new.
  Result<Tensor> TakeFeatureStorage(int64_t floats);
  void Release(std::unique_ptr<Prepared> p);
  void Request(int64_t index);
  Result<std::unique_ptr<Prepared>> Take();

  RgnnSettings settings_;
  SamplingSettings sampling_;
  int32_t rank_ = 0, workers_ = 1;
  int64_t feature_dim_ = 0;
  int64_t num_nodes() const;
  int32_t num_relations() const;
  const std::vector<int64_t>& type_offsets() const;
  bool Owns(int64_t node) const;        // this worker owns `node`
  int64_t LabelOf(int64_t node) const;  // of a node it owns

  std::shared_ptr<const SampledGraph> graph_;  // replicated structure, or null and
  std::unique_ptr<PartStructure> part_;        // partitioned
  std::unique_ptr<RowStore> store_;
  ExecutorContext context_;
  DeviceContext host_;
  GraphView shape_view_;
  std::vector<std::string> relation_names_;        // R empty names, for the layouts' partition form
  std::vector<int64_t> train_nodes_, test_nodes_;  // labelled, sorted, whole graph

  // The current pass (fixed while batches of it are being prepared).
  std::vector<int64_t> order_;
  int64_t batch_nodes_ = 0, num_batches_ = 0, next_index_ = 0;
  uint64_t pass_key_ = 0;
  bool training_ = true;
  // Used by one thread at a time: the prefetch thread when there is one, else the training thread.
  std::unique_ptr<Sampler> train_sampler_, eval_sampler_;
  std::unique_ptr<Prepared> current_;
  std::mutex spare_mu_;
  std::vector<Tensor> spare_;  // feature storage of finished batches

  // Zero-copy: gather.rows on CUDA and the pinned store's rows through their device pointer (no tensor
  // when the worker serves no rows), or null and none when the rows are gathered on the host.
  const Kernel* device_gather_ = nullptr;
  Tensor device_table_;
  RowAssembly assembly_;  // used by the thread that prepares batches

  // Figures.
  int64_t rows_local_ = 0, rows_remote_ = 0, rows_zero_copy_ = 0;
  int64_t batch_bytes_ = 0;  // the latest batch's (Figures' graph_bytes)
  double epoch_sample_s_ = 0, epoch_layout_s_ = 0, epoch_feature_s_ = 0, epoch_wait_s_ = 0;

  // Prefetch.
  std::unique_ptr<WorkerComm> prefetch_comm_;
  CudaStream prefetch_stream_;  // zero-copy with prefetch: the prefetch thread's gathers queue here
  std::thread prefetch_thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  int64_t requested_ = -1;  // the index the thread is to prepare, or -1
  bool in_flight_ = false;  // (training thread only) a batch was requested and not yet taken
  std::unique_ptr<Prepared> ready_;
  bool stop_ = false;
};

}  // namespace tessel::workers
