// FullGraphSource: the batch source of full-graph training. Every step sees the worker's whole
// partition: its edges in the kernels' layout, the input features (or row ids for one-hot input), the
// labels and masks of the owned rows, and the halo exchange that fills the rows owned by other workers
// before each layer (and returns their gradients after it). The sampled source of the next issue will
// offer the same to the layers, per mini-batch.
//
// Ownership: built from a partition it consumes (its edge arrays are released once the layout exists,
// so the worker never holds both for long). Tensors live on the executor's device. Borrows the
// communicator, which must outlive it.
// Thread safety: the training thread only. Failure: kBadData on an inconsistent partition; kRankFailed
// from the halo exchange.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "storage/partition.h"
#include "workers/executor.h"
#include "workers/rgnn/halo.h"
#include "workers/rgnn/layout.h"
#include "workers/rgnn/segment_layout.h"

namespace tessel::workers {

class FullGraphSource {
 public:
  enum class Input { kOneHot, kFeatures };
  // Which edge layouts the layers read: the segment layout of the fused kernels, and the compact
  // (relation, source) layout of the per-pair kernels (RGCN without reordering). Only those are built.
  struct Layouts {
    bool segments = true;
    bool relation_pairs = false;
    Compaction compaction = Compaction::kPerUniquePair;
  };
  static Result<std::unique_ptr<FullGraphSource>> Build(storage::WorkerPartition partition, Input input,
                                                        Layouts layouts, const ExecutorContext& context);

  int64_t num_rows() const { return num_rows_; }    // owned + halo
  int64_t num_owned() const { return num_owned_; }  // [0, num_owned) are the owned rows
  int64_t feature_dim() const { return feature_dim_; }
  int64_t total_nodes() const { return total_nodes_; }
  int64_t num_classes() const { return num_classes_; }
  int64_t total_train() const { return total_train_; }
  int64_t num_relations() const { return num_relations_; }
  int32_t num_node_types() const { return num_node_types_; }
  int32_t part() const { return part_; }
  const DeviceContext& device() const { return device_; }

  // The layouts asked for in Build (the others are empty).
  const SegmentLayout& segments() const { return segments_; }
  const RelationLayout& layout() const { return layout_; }
  // i32[rows]: the node type of each row; and the row ranges of one type, in row order (a range never
  // straddles num_owned()).
  const Tensor& row_type() const { return row_type_; }
  struct TypeRun {
    int32_t type;
    int64_t begin, end;
  };
  const std::vector<TypeRun>& type_runs() const { return type_runs_; }
  const Tensor& features() const { return features_; }  // [rows, F] (feature input only)
  const Tensor& row_id() const { return row_id_; }      // i64[rows] global id (one-hot input)
  const Tensor& labels() const { return labels_; }      // i64[owned]
  const Tensor& train_mask() const { return train_mask_; }
  const Tensor& test_mask() const { return test_mask_; }
  // Labelled rows of a mask (the loss is a mean over the train ones), counted once on the host.
  int64_t labelled_train() const { return labelled_train_; }
  int64_t labelled_test() const { return labelled_test_; }

  // full: [rows, dim] on the device; fills the halo rows from their owners.
  Status HaloForward(Tensor& full);
  // grad_full: [rows, dim]; adds the halo rows' gradients into their owners' rows.
  Status HaloBackward(Tensor& grad_full);
  int64_t halo_bytes_sent() const { return halo_.bytes_sent(); }
  int64_t halo_bytes_received() const { return halo_.bytes_received(); }

 private:
  FullGraphSource() = default;
  // Runs the exchange on a host copy when the tensor is in device memory.
  Status Exchange(Tensor& full, bool forward);

  DeviceContext device_;
  int32_t part_ = 0;
  int64_t num_rows_ = 0, num_owned_ = 0, feature_dim_ = 0, total_nodes_ = 0, num_classes_ = 0, total_train_ = 0;
  int64_t num_relations_ = 0;
  int32_t num_node_types_ = 1;
  int64_t labelled_train_ = 0, labelled_test_ = 0;
  bool has_peers_ = false;
  SegmentLayout segments_;
  RelationLayout layout_;
  Tensor row_type_;
  std::vector<TypeRun> type_runs_;
  HaloExchange halo_;
  Tensor features_, row_id_, labels_, train_mask_, test_mask_;
  Tensor staging_;  // pinned host copy for the halo exchange of device tensors
};

}  // namespace tessel::workers
