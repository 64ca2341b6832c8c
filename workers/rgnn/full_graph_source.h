// FullGraphSource: the batch source of full-graph training. Every step sees the worker's whole
// partition: its edges in the kernels' layout, the input features (the owned rows' from the partition,
// the halo rows' from their owners when it is built; or row ids for one-hot input), the
// labels and masks of the owned rows, and the halo exchange that fills the rows owned by other workers
// before each layer (and returns their gradients after it). Every layer reads the same GraphView; the
// sampled source (sampled_source.h) offers the layers one view per layer and mini-batch instead. With a
// streamed halo (Layouts::streamed) the view holds the owned rows only, and each peer's block of rows has a
// view of its own that the executor runs as the block arrives (BatchSource::halo_rounds).
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
#include "workers/rgnn/batch_source.h"
#include "workers/rgnn/graph_view.h"
#include "workers/rgnn/halo.h"
#include "workers/rgnn/layout.h"
#include "workers/rgnn/segment_layout.h"

namespace tessel::workers {

class FullGraphSource final : public BatchSource {
 public:
  enum class Input { kOneHot, kFeatures };
  // Which edge layouts the layers read: the segment layout of the fused kernels, and the compact
  // (relation, source) layout of the per-pair kernels (RGCN without reordering). Only those are built.
  struct Layouts {
    bool segments = true;
    bool relation_pairs = false;
    Compaction compaction = Compaction::kPerUniquePair;
    bool edge_pairs = true;  // the segment layout's dedge_pair (RgnnModel::ReadsEdgePairs)
    // train.halo = "streamed" (segments only): one segment layout per block of input rows, the owned rows'
    // and each peer's, and no halo rows kept (BatchSource::halo_rounds). With one worker there is no halo.
    bool streamed = false;
  };
  // `layers`: how many layers read each batch (every one reads the same view). The features take `dtype`
  // (the executor's: f32, or f64 widened from the partition's f32).
  static Result<std::unique_ptr<FullGraphSource>> Build(storage::WorkerPartition partition, Input input,
                                                        Layouts layouts, int32_t layers, DType dtype,
                                                        const ExecutorContext& context);

  // What every layer reads: the partition's rows (owned + halo) and edges.
  const GraphView& view() const { return view_; }
  int64_t num_rows() const { return view_.rows; }    // owned + halo
  int64_t num_owned() const { return view_.owned; }  // [0, num_owned) are the owned rows
  int64_t feature_dim() const { return feature_dim_; }
  int64_t total_nodes() const { return total_nodes_; }
  int64_t num_classes() const { return num_classes_; }
  int64_t total_train() const { return total_train_; }
  int64_t num_relations() const { return view_.relations; }
  int32_t num_node_types() const { return view_.node_types; }
  int32_t part() const { return part_; }
  const DeviceContext& device() const { return device_; }

  const Tensor& features() const { return features_; }  // [rows, F] (feature input only)
  const Tensor& labels() const { return labels_; }      // i64[owned]
  const Tensor& train_mask() const { return train_mask_; }
  const Tensor& test_mask() const { return test_mask_; }
  // Labelled rows of a mask (the loss is a mean over the train ones), counted once on the host.
  int64_t labelled_train() const { return labelled_train_; }
  int64_t labelled_test() const { return labelled_test_; }

  // BatchSource: one batch per pass, the whole partition (its test mask for evaluation).
  Status Begin(Pass pass, int64_t epoch) override;
  Result<const Batch*> Next() override;
  // full: [rows, dim] on the device; fills the halo rows from their owners.
  Status HaloForward(Tensor& full) override;
  // grad_full: [rows, dim]; adds the halo rows' gradients into their owners' rows.
  Status HaloBackward(Tensor& grad_full) override;
  int halo_rounds() const override { return static_cast<int>(rounds_.size()); }
  const GraphView* RoundView(int k) const override { return &rounds_[static_cast<size_t>(k - 1)]; }
  Status FetchRound(int k, const Tensor& owned, Tensor& block) override;
  Status ReturnRound(int k, const Tensor& dblock, Tensor& grad_owned) override;
  SourceFigures Figures() const override;
  int64_t halo_bytes_sent() const { return halo_.bytes_sent(); }
  int64_t halo_bytes_received() const { return halo_.bytes_received(); }

 private:
  FullGraphSource() = default;
  // The steps of one part alone, each before a collective (the caller agrees on their outcome):
  // whether the labels, masks and features cover the owned rows; and the edge layouts and row types
  // (which release the partition's edges).
  static Status CheckOwnedRows(const storage::WorkerPartition& part, Input input);
  Status BuildLayouts(storage::WorkerPartition& part, const Layouts& layouts, DType dtype,
                      const ExecutorContext& context);
  // Runs the exchange on a host copy when the tensor is in device memory.
  Status Exchange(Tensor& full, bool forward);
  // Grows the pinned staging buffer to `floats` (its contents are not kept).
  Status Stage(int64_t floats);

  DeviceContext device_;
  int32_t part_ = 0;
  int64_t feature_dim_ = 0, total_nodes_ = 0, num_classes_ = 0, total_train_ = 0;
  int64_t labelled_train_ = 0, labelled_test_ = 0;
  bool has_peers_ = false;
  GraphView view_;
  std::vector<GraphView> rounds_;  // streamed: round k's block view at k - 1
  HaloExchange halo_;
  Tensor features_, labels_, train_mask_, test_mask_;
  Tensor staging_;  // pinned host copy for the halo exchange of device tensors
  Batch batch_;
  bool pass_done_ = true;
};

}  // namespace tessel::workers
