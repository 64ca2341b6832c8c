// WorkerPartition: what one worker trains on. The coordinator builds one per worker from the graph
// and a part assignment, serialises it and sends it; `tessel partition` writes the same structure to
// DIR/part-K.h5. Rows are the worker's local node indices: [0, num_owned) are the nodes it owns
// (a contiguous range of the range-partitioned id space), [num_owned, num_rows) its 1-hop halo,
// sorted by new id, hence grouped by owning part.
// Thread safety: plain values. Failure: every function returns Status; bad bytes are kBadData.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "storage/graph.h"

namespace tessel::storage {

struct WorkerPartition {
  int32_t part = 0;
  int32_t num_parts = 1;
  // Range partition book over new ids: part p owns new ids [offsets[p], offsets[p+1]).
  std::vector<int64_t> offsets;
  int64_t num_owned = 0;
  std::vector<int64_t> row_new_id;   // [num_rows] new global id of each row
  std::vector<int64_t> row_orig_id;  // [num_rows] global id in the graph file (types concatenated)
  int64_t num_rows() const { return static_cast<int64_t>(row_new_id.size()); }

  // Every edge whose destination is owned, across all relations, sorted by (relation, src, dst).
  std::vector<std::string> relation_names;
  std::vector<int64_t> rel_ptr;  // [num_relations + 1] offsets into src/dst
  std::vector<int64_t> src;      // row index, owned or halo
  std::vector<int64_t> dst;      // row index, always < num_owned
  int32_t num_relations() const { return static_cast<int32_t>(relation_names.size()); }

  // Input features of the owned rows, [num_owned * feature_dim]: a halo row's features are its owner's,
  // and a worker takes them from there when it loads (a part carries no copy of them). Empty
  // (feature_dim 0) when the graph is featureless or its node types disagree on the feature width: the
  // model then uses one-hot input.
  int64_t feature_dim = 0;
  std::vector<float> features;

  // Supervision for owned rows only, [num_owned] each. labels: -1 = unlabelled.
  std::vector<int64_t> labels;
  std::vector<uint8_t> train_mask, val_mask, test_mask;

  // Whole-graph facts every worker needs.
  std::vector<int64_t> type_offsets;  // [node types + 1]: type t's global ids are [offsets[t], offsets[t+1])
  int64_t total_nodes = 0;
  int64_t num_classes = 0;
  int64_t total_train = 0;  // labelled training nodes over all parts (the loss is a mean over these)
  int64_t total_test = 0;
  // GraphHash (storage/partition_manifest.h) of the graph it was cut from, in a part file and the
  // partition.json beside it; "" for a partition built in memory by the coordinator.
  std::string graph_hash;
};

// Range-book lookup: the part owning `new_id` and its local (owned-row) index there, or {-1, -1} when
// `new_id` is outside [0, offsets.back()). `offsets` is WorkerPartition::offsets. O(log num_parts).
struct BookEntry {
  int32_t part = -1;
  int64_t local = -1;
};
BookEntry LookupRangeBook(const std::vector<int64_t>& offsets, int64_t new_id);

// Builds one WorkerPartition per part. `part_of[g]` is the part of global node g (graph-file id space).
// New ids order nodes by (part, original id), which makes the book a range book.
Result<std::vector<WorkerPartition>> BuildWorkerPartitions(const HeteroGraph& graph,
                                                           const std::vector<int32_t>& part_of, int32_t num_parts);

// Checks every invariant of a WorkerPartition: the book covers total_nodes, owned rows are the part's
// range, halo rows are sorted and outside it, rel_ptr is monotone, edge rows are in range and sorted,
// array sizes agree, labels < num_classes, masks 0/1. kBadData naming the first violation. `features`
// kToCome: the features are empty, to be written to the part file row by row (PartitionFileWriter).
enum class PartFeatures { kHeld, kToCome };
Status ValidatePartition(const WorkerPartition& p, PartFeatures features = PartFeatures::kHeld);

// Byte encoding for MPI transfer (magic + version + length-prefixed arrays). Decode validates every
// size and index and returns kBadData on anything inconsistent.
std::vector<uint8_t> EncodePartition(const WorkerPartition& p);
Result<WorkerPartition> DecodePartition(const uint8_t* data, size_t size);

// HDF5 files for `tessel partition --out DIR` (DIR/part-K.h5). Write goes through a temporary name.
Status WritePartitionFile(const WorkerPartition& p, const std::string& path);

// A part file written by one that does not hold its features (the distributed partitioner streams them
// from the chunk files to their parts' builders, a slab at a time): Create writes everything of `p` but
// its feature rows, under a temporary name beside `path`, with the features' dataset [num_owned,
// feature_dim] allocated in place (contiguous, native float); WriteRows puts owned rows there; Commit,
// once every owned row has been written, syncs the file and renames it to `path`. Destroyed before
// Commit, it removes the temporary. WritePartitionFile is Create, WriteRows of every row, Commit.
// Failure: kStorage naming the file; WriteRows past num_owned and Commit with rows missing are kInternal.
// Thread safety: one owner.
class PartitionFileWriter {
 public:
  static Result<PartitionFileWriter> Create(const WorkerPartition& p, const std::string& path);
  PartitionFileWriter(PartitionFileWriter&& other) noexcept;
  PartitionFileWriter& operator=(PartitionFileWriter&&) = delete;
  PartitionFileWriter(const PartitionFileWriter&) = delete;
  ~PartitionFileWriter();

  // Owned rows [first, first + count): count * feature_dim floats.
  Status WriteRows(int64_t first, const float* rows, int64_t count);
  Status Commit();

 private:
  PartitionFileWriter() = default;
  std::string path_, tmp_;
  int fd_ = -1;
  int64_t data_offset_ = 0, feature_dim_ = 0, rows_written_ = 0;  // written_: one flag an owned row
  std::vector<bool> written_;
};

// Reads DIR/part-K.h5 back (kBadData naming the file for anything missing, truncated or inconsistent).
Result<WorkerPartition> ReadPartitionFile(const std::string& path);

}  // namespace tessel::storage
