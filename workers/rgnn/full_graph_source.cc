#include "workers/rgnn/full_graph_source.h"

#include <algorithm>
#include <cstring>

namespace tessel::workers {
namespace {

// A host vector as a tensor on `device`.
template <typename T>
Result<Tensor> OnDevice(const std::vector<T>& v, std::vector<int64_t> shape, const DeviceContext& device) {
  TESSEL_ASSIGN_OR_RETURN(Tensor t, Tensor::Empty(DTypeOf<T>(), std::move(shape), *device.allocator));
  TESSEL_RETURN_IF_ERROR(
      CopyMemory(t.raw(), device.device, v.data(), Device::kCpu, v.size() * sizeof(T), device.stream));
  return t;
}

}  // namespace

Status FullGraphSource::CheckOwnedRows(const storage::WorkerPartition& part, Input input) {
  const int64_t owned = part.num_owned;
  if (input == Input::kFeatures && part.feature_dim <= 0) {
    return UsageError("model.input = \"features\" but the graph's nodes carry no (uniform) features");
  }
  if (static_cast<int64_t>(part.labels.size()) != owned || static_cast<int64_t>(part.train_mask.size()) != owned ||
      static_cast<int64_t>(part.test_mask.size()) != owned) {
    return BadDataError(StrCat("partition ", part.part, ": labels or masks do not cover the owned nodes"));
  }
  if (input == Input::kFeatures && static_cast<int64_t>(part.features.size()) != owned * part.feature_dim) {
    return BadDataError(StrCat("partition ", part.part, ": features do not cover the owned rows"));
  }
  return Status();
}

Status FullGraphSource::BuildLayouts(storage::WorkerPartition& part, const Layouts& layouts, DType dtype,
                                     const ExecutorContext& context) {
  const DeviceContext& device = context.device;
  GraphView& v = view_;
  const int64_t threads = context.pool != nullptr ? context.pool->num_threads() : 1;
  const bool streamed = layouts.streamed && halo_.rounds() > 0;
  const SegmentLayout::Options options{
      .compaction = layouts.compaction,
      .target_block_edges = SegmentLayout::BlockEdgesFor(static_cast<int64_t>(part.dst.size()), threads),
      .norm_dtype = dtype,
      .edge_pairs = layouts.edge_pairs};
  if (streamed) {
    if (!layouts.segments || layouts.relation_pairs) {
      return InternalError("a streamed halo needs the segment layout alone");
    }
    // The owned rows' block first, then round k's.
    std::vector<SegmentLayout::RowRange> blocks = {{0, part.num_owned}};
    for (int k = 1; k <= halo_.rounds(); ++k)
      blocks.push_back({halo_.BlockBegin(k), halo_.BlockBegin(k) + halo_.BlockRows(k)});
    TESSEL_ASSIGN_OR_RETURN(std::vector<SegmentLayout> built,
                            SegmentLayout::BuildSourceBlocks(part, blocks, device, threads, options));
    v.segments = std::move(built[0]);
    rounds_.resize(static_cast<size_t>(halo_.rounds()));
    for (int k = 1; k <= halo_.rounds(); ++k) {
      GraphView& r = rounds_[static_cast<size_t>(k - 1)];
      r.device = device;
      r.rows = halo_.BlockRows(k);
      r.owned = v.owned;
      r.relations = v.relations;
      r.segments = std::move(built[static_cast<size_t>(k)]);
    }
  } else if (layouts.segments) {
    TESSEL_ASSIGN_OR_RETURN(v.segments, SegmentLayout::Build(part, device, options));
  }
  if (layouts.relation_pairs) {
    TESSEL_ASSIGN_OR_RETURN(v.pairs, RelationLayout::Build(part, layouts.compaction, dtype));
    TESSEL_RETURN_IF_ERROR(MoveToDevice(v.pairs, device));
  }
  // The layouts hold the edges now; the partition's copies go before anything else is allocated.
  std::vector<int64_t>().swap(part.src);
  std::vector<int64_t>().swap(part.dst);
  // Node types: a row's type from its global id (types are concatenated in the id space); with a streamed
  // halo the view's rows are the owned ones (no layer that streams reads a block's types).
  const int64_t rows = streamed ? part.num_owned : part.num_rows();
  v.rows = rows;
  std::vector<int32_t> types(static_cast<size_t>(rows), 0);
  const std::vector<int64_t>& offsets = part.type_offsets;
  v.node_types = offsets.size() >= 2 ? static_cast<int32_t>(offsets.size() - 1) : 1;
  for (GraphView& r : rounds_) r.node_types = v.node_types;
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t id = part.row_orig_id[static_cast<size_t>(i)];
    const auto it = std::upper_bound(offsets.begin(), offsets.end(), id);
    types[static_cast<size_t>(i)] = offsets.size() >= 2 ? static_cast<int32_t>(it - offsets.begin()) - 1 : 0;
  }
  v.type_runs = TypeRunsOf(types, part.num_owned);
  TESSEL_ASSIGN_OR_RETURN(v.row_type, OnDevice(types, {rows}, device));
  return Status();
}

Result<std::unique_ptr<FullGraphSource>> FullGraphSource::Build(storage::WorkerPartition part, Input input,
                                                                Layouts layouts, int32_t layers, DType dtype,
                                                                const ExecutorContext& context) {
  std::unique_ptr<FullGraphSource> s(new FullGraphSource());
  const DeviceContext& device = context.device;
  s->device_ = device;
  s->part_ = part.part;
  GraphView& v = s->view_;
  v.device = device;
  v.rows = part.num_rows();
  v.owned = part.num_owned;
  s->feature_dim_ = part.feature_dim;
  s->total_nodes_ = part.total_nodes;
  s->num_classes_ = part.num_classes;
  s->total_train_ = part.total_train;
  v.relations = part.num_relations();
  s->has_peers_ = context.comm->size() > 1;
  if (part.num_classes < 2) {
    return BadDataError(StrCat("the graph has ", part.num_classes, " classes; node classification needs at least 2"));
  }
  const int64_t owned = part.num_owned;
  WorkerComm& comm = *context.comm;
  // The steps of one part alone come before each collective, and the workers agree on their outcome
  // (AgreeOn), so a bad part stops every worker rather than leaving its peers waiting in an exchange.
  TESSEL_RETURN_IF_ERROR(AgreeOn(CheckOwnedRows(part, input), comm));
  TESSEL_ASSIGN_OR_RETURN(s->halo_, HaloExchange::Build(part, comm));
  if (layouts.streamed && s->halo_.rounds() > 0) {
    // A streamed halo keeps no halo rows: their new ids served the exchange's plan, and their global ids
    // matter only to a one-hot first layer. They go before the layouts are built (the load's peak).
    std::vector<int64_t>().swap(part.row_new_id);
    if (input == Input::kFeatures)
      std::vector<int64_t>(part.row_orig_id.begin(), part.row_orig_id.begin() + owned).swap(part.row_orig_id);
  }
  TESSEL_RETURN_IF_ERROR(AgreeOn(s->BuildLayouts(part, layouts, dtype, context), comm));
  // The view's rows: owned and halo, or with a streamed halo the owned ones alone.
  const int64_t rows = v.rows;
  const bool fetch_halo = s->has_peers_ && s->rounds_.empty();

  if (input == Input::kFeatures) {
    // The halo rows' features from their owners, as a layer's activations move (every worker, whatever
    // its halo, joins the exchange); a streamed halo fetches them as each layer runs. On the CPU in f32
    // they land in the tensor itself: the part's copy of the owned rows goes first.
    if (device.device == Device::kCpu && dtype == DType::kF32) {
      TESSEL_ASSIGN_OR_RETURN(s->features_, Tensor::Empty(DType::kF32, {rows, part.feature_dim}, *device.allocator));
      std::copy(part.features.begin(), part.features.end(), s->features_.data<float>());
      std::vector<float>().swap(part.features);
      if (fetch_halo) TESSEL_RETURN_IF_ERROR(s->halo_.Forward(s->features_.data<float>(), part.feature_dim));
    } else {
      part.features.resize(static_cast<size_t>(rows * part.feature_dim));
      if (fetch_halo) TESSEL_RETURN_IF_ERROR(s->halo_.Forward(part.features.data(), part.feature_dim));
      if (dtype == DType::kF64) {
        const std::vector<double> wide(part.features.begin(), part.features.end());
        TESSEL_ASSIGN_OR_RETURN(s->features_, OnDevice(wide, {rows, part.feature_dim}, device));
      } else {
        TESSEL_ASSIGN_OR_RETURN(s->features_, OnDevice(part.features, {rows, part.feature_dim}, device));
      }
      std::vector<float>().swap(part.features);
    }
  }
  // Global ids index the first layer's tables under one-hot input only; with features no kernel reads them.
  if (input != Input::kFeatures) {
    const auto ids = [&](int64_t begin, int64_t count) {
      return OnDevice(std::vector<int64_t>(part.row_orig_id.begin() + begin, part.row_orig_id.begin() + begin + count),
                      {count}, device);
    };
    TESSEL_ASSIGN_OR_RETURN(v.row_id, ids(0, rows));
    for (int k = 1; k <= s->halo_rounds(); ++k) {
      TESSEL_ASSIGN_OR_RETURN(s->rounds_[static_cast<size_t>(k - 1)].row_id,
                              ids(s->halo_.BlockBegin(k), s->halo_.BlockRows(k)));
    }
  }
  TESSEL_ASSIGN_OR_RETURN(s->labels_, OnDevice(part.labels, {owned}, device));
  TESSEL_ASSIGN_OR_RETURN(s->train_mask_, OnDevice(part.train_mask, {owned}, device));
  TESSEL_ASSIGN_OR_RETURN(s->test_mask_, OnDevice(part.test_mask, {owned}, device));
  for (int64_t i = 0; i < owned; ++i) {
    const bool labelled = part.labels[static_cast<size_t>(i)] >= 0;
    s->labelled_train_ += labelled && part.train_mask[static_cast<size_t>(i)] != 0 ? 1 : 0;
    s->labelled_test_ += labelled && part.test_mask[static_cast<size_t>(i)] != 0 ? 1 : 0;
  }
  Batch& b = s->batch_;
  b.views.assign(static_cast<size_t>(std::max<int32_t>(1, layers)), &s->view_);
  b.features = input == Input::kFeatures ? &s->features_ : nullptr;
  b.labels = &s->labels_;
  b.train_mask = &s->train_mask_;
  b.test_mask = &s->test_mask_;
  b.labelled_train = s->labelled_train_;
  b.labelled_test = s->labelled_test_;
  b.step_train_rows = s->total_train_;
  b.seeds = owned;
  return s;
}

Status FullGraphSource::Begin(Pass, int64_t) {
  pass_done_ = false;
  return Status();
}

Result<const Batch*> FullGraphSource::Next() {
  if (pass_done_) return static_cast<const Batch*>(nullptr);
  pass_done_ = true;
  return &batch_;
}

SourceFigures FullGraphSource::Figures() const {
  SourceFigures f;
  f.halo_bytes_sent = halo_.bytes_sent();
  f.halo_bytes_received = halo_.bytes_received();
  // The worker's node features, labels and masks, and its partition's adjacency as the layers read it.
  f.graph_bytes =
      static_cast<int64_t>(features_.nbytes() + labels_.nbytes() + train_mask_.nbytes() + test_mask_.nbytes()) +
      GraphViewBytes(view_);
  for (const GraphView& r : rounds_) f.graph_bytes += GraphViewBytes(r);
  return f;
}

Status FullGraphSource::Exchange(Tensor& full, bool forward) {
  if (!has_peers_ || !rounds_.empty()) return Status();  // a streamed halo moves in rounds (FetchRound)
  if (full.dtype() != DType::kF32) return InternalError("the halo exchange moves f32 rows only");
  const int64_t dim = full.dim(1);
  if (device_.device == Device::kCpu) {
    return forward ? halo_.Forward(full.data<float>(), dim) : halo_.Backward(full.data<float>(), dim);
  }
  // Device memory: staged through a pinned host buffer (the exchange itself is MPI over host memory).
  TESSEL_RETURN_IF_ERROR(Stage(full.numel()));
  TESSEL_RETURN_IF_ERROR(
      CopyMemory(staging_.raw(), Device::kCpu, full.raw(), full.device(), full.nbytes(), device_.stream));
  TESSEL_RETURN_IF_ERROR(forward ? halo_.Forward(staging_.data<float>(), dim)
                                 : halo_.Backward(staging_.data<float>(), dim));
  return CopyMemory(full.raw(), full.device(), staging_.raw(), Device::kCpu, full.nbytes(), device_.stream);
}

Status FullGraphSource::HaloForward(Tensor& full) { return Exchange(full, /*forward=*/true); }
Status FullGraphSource::HaloBackward(Tensor& grad_full) { return Exchange(grad_full, /*forward=*/false); }

Status FullGraphSource::FetchRound(int k, const Tensor& owned, Tensor& block) {
  if (owned.dtype() != DType::kF32 || block.dtype() != DType::kF32) {
    return InternalError("the halo exchange moves f32 rows only");
  }
  const int64_t dim = owned.dim(1);
  if (device_.device == Device::kCpu) return halo_.ForwardRound(k, owned.data<float>(), block.data<float>(), dim);
  // Device memory: staged through a pinned host buffer, the owned rows then the block.
  TESSEL_RETURN_IF_ERROR(Stage(owned.numel() + block.numel()));
  float* host = staging_.data<float>();
  TESSEL_RETURN_IF_ERROR(CopyMemory(host, Device::kCpu, owned.raw(), owned.device(), owned.nbytes(), device_.stream));
  TESSEL_RETURN_IF_ERROR(halo_.ForwardRound(k, host, host + owned.numel(), dim));
  return CopyMemory(block.raw(), block.device(), host + owned.numel(), Device::kCpu, block.nbytes(), device_.stream);
}

Status FullGraphSource::ReturnRound(int k, const Tensor& dblock, Tensor& grad_owned) {
  if (grad_owned.dtype() != DType::kF32 || dblock.dtype() != DType::kF32) {
    return InternalError("the halo exchange moves f32 rows only");
  }
  const int64_t dim = grad_owned.dim(1);
  if (device_.device == Device::kCpu) {
    return halo_.BackwardRound(k, dblock.data<float>(), grad_owned.data<float>(), dim);
  }
  TESSEL_RETURN_IF_ERROR(Stage(grad_owned.numel() + dblock.numel()));
  float* host = staging_.data<float>();
  TESSEL_RETURN_IF_ERROR(
      CopyMemory(host, Device::kCpu, grad_owned.raw(), grad_owned.device(), grad_owned.nbytes(), device_.stream));
  TESSEL_RETURN_IF_ERROR(CopyMemory(host + grad_owned.numel(), Device::kCpu, dblock.raw(), dblock.device(),
                                    dblock.nbytes(), device_.stream));
  TESSEL_RETURN_IF_ERROR(halo_.BackwardRound(k, host + grad_owned.numel(), host, dim));
  return CopyMemory(grad_owned.raw(), grad_owned.device(), host, Device::kCpu, grad_owned.nbytes(), device_.stream);
}

Status FullGraphSource::Stage(int64_t floats) {
  if (staging_.numel() >= floats) return Status();
  staging_ = Tensor();
  TESSEL_ASSIGN_OR_RETURN(staging_, Tensor::Empty(DType::kF32, {floats}, PinnedAllocator()));
  return Status();
}

}  // namespace tessel::workers
