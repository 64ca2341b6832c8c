// GraphView: the rows and edges one RGNN layer reads in one pass. Its input has `rows` rows, of which
// the first `owned` are also its output rows (the destinations). A full-graph batch source has one view
// for every layer (owned rows + halo rows); the sampled source makes one per layer and mini-batch, where
// layer l's destinations are layer l+1's input rows (views[l + 1].rows == views[l].owned). A streamed halo's
// round view (BatchSource::RoundView) is the exception: its input rows are one peer's block, none of them an
// output row, and only layers of a model that streams (RgnnModel::StreamsHalo) are bound to one.
//
// Ownership: a value that owns its tensors (on the executor's device). Thread safety: immutable once
// built; a layer borrows the view it is bound to until the next Bind.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "workers/executor.h"
#include "workers/rgnn/layout.h"
#include "workers/rgnn/segment_layout.h"

namespace tessel::workers {

// A maximal range of consecutive rows of one node type; a range never straddles `owned`.
struct TypeRun {
  int32_t type;
  int64_t begin, end;
};

struct GraphView {
  DeviceContext device;
  int64_t rows = 0;       // input rows
  int64_t owned = 0;      // output rows: [0, owned) of the input rows
  int64_t relations = 0;  // R of the whole graph (parameters are per relation, edges may use fewer)
  int32_t node_types = 1;
  SegmentLayout segments;          // the fused kernels' layout (when the model reads it)
  RelationLayout pairs;            // the compact (relation, source) layout (RGCN without reordering)
  Tensor row_type;                 // i32[rows]: each row's node type
  std::vector<TypeRun> type_runs;  // in row order
  Tensor row_id;                   // i64[rows]: each row's global node id (the one-hot input's index)
};

// The runs of `types` (one per row), split at `owned`.
std::vector<TypeRun> TypeRunsOf(const std::vector<int32_t>& types, int64_t owned);

// The bytes of the view's tensors: its layouts, row types and row ids (the adjacency as the kernels read it).
int64_t GraphViewBytes(const GraphView& view);

// Replaces a host tensor (or every tensor of a layout) by a copy on `device`; a no-op on CPU and for
// empty tensors. The copies are queued on the device's stream.
Status MoveToDevice(Tensor& t, const DeviceContext& device);
Status MoveToDevice(SegmentLayout& layout, const DeviceContext& device);
Status MoveToDevice(RelationLayout& layout, const DeviceContext& device);

}  // namespace tessel::workers
