#include "workers/rgnn/sampled_source.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "core/cuda_device.h"
#include "storage/partition.h"
#include "workers/rgnn/model_registry.h"

namespace tessel::workers {
namespace {

using Clock = std::chrono::steady_clock;
using Seconds = std::chrono::duration<double>;

template <typename T>
Result<Tensor> HostTensor(const std::vector<T>& v, std::vector<int64_t> shape) {
  TESSEL_ASSIGN_OR_RETURN(Tensor t, Tensor::Empty(DTypeOf<T>(), std::move(shape)));
  if (!v.empty()) std::memcpy(t.raw(), v.data(), v.size() * sizeof(T));
  return t;
}

}  // namespace

struct SampledSource::Prepared {
  std::vector<GraphView> views;
  Tensor feature_storage;                          // host memory behind `features` (reused from batch to batch)
  Tensor features, labels, train_mask, test_mask;  // features may already be on the device (zero-copy)
  Batch batch;
  double sample_s = 0, layout_s = 0, feature_s = 0;
  int64_t rows_local = 0, rows_remote = 0, rows_zero_copy = 0;
  Status status;
};

MemoryRowStore::MemoryRowStore(std::vector<int64_t> ids, std::vector<float> rows, int64_t dim)
    : ids_(std::move(ids)), rows_(std::move(rows)), dim_(dim) {
  if (std::is_sorted(ids_.begin(), ids_.end())) return;
  std::vector<size_t> order(ids_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ids_[a] < ids_[b]; });
  std::vector<int64_t> sorted_ids(ids_.size());
  std::vector<float> sorted_rows(rows_.size());
  const auto row_floats = static_cast<size_t>(dim_);
  for (size_t i = 0; i < order.size(); ++i) {
    sorted_ids[i] = ids_[order[i]];
    std::memcpy(sorted_rows.data() + i * row_floats, rows_.data() + order[i] * row_floats, row_floats * sizeof(float));
  }
  ids_ = std::move(sorted_ids);
  rows_ = std::move(sorted_rows);
}

const float* MemoryRowStore::Row(int64_t id) const {
  const auto it = std::lower_bound(ids_.begin(), ids_.end(), id);
  if (it == ids_.end() || *it != id) return nullptr;
  return rows_.data() + (it - ids_.begin()) * dim_;
}

Status MemoryRowStore::Gather(std::span<const int64_t> ids, float* out, int32_t rank) const {
  const auto row_bytes = static_cast<size_t>(dim_) * sizeof(float);
  for (size_t i = 0; i < ids.size(); ++i) {
    const float* row = Row(ids[i]);
    if (row == nullptr) {
      return BadDataError(StrCat("worker ", rank, " was asked for the feature row of node ", ids[i],
                                 ", which it does not own (", ids_.size(), " rows)"));
    }
    std::memcpy(out + static_cast<int64_t>(i) * dim_, row, row_bytes);
  }
  return Status();
}

Status ExchangeFeatureRows(const RowStore& store, std::span<const int32_t> owners, int32_t rank,
                           const std::vector<int64_t>& ids, WorkerComm& comm, FeatureRowSources* sources) {
  const int64_t F = store.dim();
  const auto W = static_cast<size_t>(comm.size());
  FeatureRowSources& s = *sources;
  s.local_ids.clear();
  s.local_at.clear();
  s.remote_at.clear();
  // A problem on this side is reported only after the exchange: a worker that left it early would leave
  // the others waiting in it.
  Status problem;
  if (owners.size() != ids.size())
    problem = InternalError(StrCat(ids.size(), " feature rows with ", owners.size(), " owners"));
  // Rows by owner: requests to the others, positions in the batch of what comes back.
  std::vector<std::vector<int64_t>> want(W), where(W);
  for (size_t i = 0; i < ids.size() && problem.ok(); ++i) {
    const int32_t owner = owners[i];
    if (owner < 0 || owner >= static_cast<int32_t>(W)) {
      problem = BadDataError(StrCat("worker ", rank, ": feature row ", i, " of the batch (node ", ids[i],
                                    ") belongs to worker ", owner, " of ", W));
      break;
    }
    if (owner == rank) {
      s.local_ids.push_back(ids[i]);
      s.local_at.push_back(static_cast<int64_t>(i));
    } else {
      want[static_cast<size_t>(owner)].push_back(ids[i]);
      where[static_cast<size_t>(owner)].push_back(static_cast<int64_t>(i));
    }
  }
  if (W == 1) return problem;

  std::vector<std::vector<int64_t>> asked;
  TESSEL_RETURN_IF_ERROR(comm.AllToAll(want, &asked));
  std::vector<int64_t> send_counts(W), send_offsets(W), recv_counts(W), recv_offsets(W);
  int64_t send_rows = 0, recv_rows = 0;
  for (size_t q = 0; q < W; ++q) {
    send_offsets[q] = send_rows * F;
    send_counts[q] = static_cast<int64_t>(asked[q].size()) * F;
    send_rows += static_cast<int64_t>(asked[q].size());
    recv_offsets[q] = recv_rows * F;
    recv_counts[q] = static_cast<int64_t>(want[q].size()) * F;
    recv_rows += static_cast<int64_t>(want[q].size());
  }
  // Grow-only per thread: a fresh buffer per batch would cost the kernel's page zeroing on every batch.
  thread_local std::vector<float> send;
  if (send.size() < static_cast<size_t>(send_rows * F)) send.resize(static_cast<size_t>(send_rows * F));
  if (s.received.size() < static_cast<size_t>(recv_rows * F)) s.received.resize(static_cast<size_t>(recv_rows * F));
  for (size_t q = 0; q < W && problem.ok(); ++q) {
    if (!asked[q].empty()) problem = store.Gather(asked[q], send.data() + send_offsets[q], rank);
  }
  TESSEL_RETURN_IF_ERROR(
      comm.AllToAllV(send.data(), send_counts, send_offsets, s.received.data(), recv_counts, recv_offsets));
  for (size_t q = 0; q < W; ++q) s.remote_at.insert(s.remote_at.end(), where[q].begin(), where[q].end());
  return problem;
}

Status FetchFeatureRows(const RowStore& store, std::span<const int32_t> owners, int32_t rank,
                        const std::vector<int64_t>& ids, float* out, WorkerComm& comm, int64_t* rows_local,
                        int64_t* rows_remote) {
  thread_local FeatureRowSources s;
  TESSEL_RETURN_IF_ERROR(ExchangeFeatureRows(store, owners, rank, ids, comm, &s));
  const int64_t F = store.dim();
  TESSEL_RETURN_IF_ERROR(store.GatherAt(s.local_ids, s.local_at, out, rank));
  for (size_t k = 0; k < s.remote_at.size(); ++k) {
    std::memcpy(out + s.remote_at[k] * F, s.received.data() + static_cast<int64_t>(k) * F,
                static_cast<size_t>(F) * sizeof(float));
  }
  *rows_local += static_cast<int64_t>(s.local_ids.size());
  *rows_remote += static_cast<int64_t>(s.remote_at.size());
  return Status();
}

namespace {

// A device tensor of at least `numel` elements from `scratch` (grown, never shrunk), viewed as `shape`.
Result<Tensor> ScratchView(Tensor& scratch, DType dtype, std::vector<int64_t> shape, const DeviceContext& device) {
  int64_t numel = 1;
  for (const int64_t d : shape) numel *= d;
  if (scratch.raw() == nullptr || scratch.numel() < numel) {
    TESSEL_ASSIGN_OR_RETURN(scratch,
                            Tensor::Empty(dtype, {std::max<int64_t>(1, numel + numel / 4)}, *device.allocator));
  }
  return Tensor::Borrow(scratch.raw(), dtype, std::move(shape), device.device);
}

}  // namespace

Status AssembleFeatureRows(const Kernel& gather, const Tensor& table, std::span<const int64_t> table_rows,
                           const FeatureRowSources& sources, const DeviceContext& device, RowAssembly* scratch,
                           Tensor& out) {
  const int64_t rows = out.shape()[0], F = out.shape()[1];
  const auto L = static_cast<int64_t>(table_rows.size());
  const auto R = static_cast<int64_t>(sources.remote_at.size());
  if (L != static_cast<int64_t>(sources.local_at.size()) || L + R != rows) {
    return InternalError(
        StrCat("a batch of ", rows, " feature rows assembled from ", L, " local and ", R, " received"));
  }
  if (rows == 0) return Status();
  CallOptions call;
  call.cuda_stream = device.stream;
  call.device_ordinal = device.ordinal;
  const auto upload = [&](std::span<const int64_t> v) -> Result<Tensor> {
    TESSEL_ASSIGN_OR_RETURN(Tensor ids,
                            ScratchView(scratch->ids, DType::kI64, {static_cast<int64_t>(v.size())}, device));
    TESSEL_RETURN_IF_ERROR(
        CopyMemory(ids.raw(), device.device, v.data(), Device::kCpu, v.size() * sizeof(int64_t), device.stream));
    return ids;
  };
  bool in_place = R == 0;  // every row local and in batch order: one gather straight into `out`
  for (int64_t k = 0; k < L && in_place; ++k) in_place = sources.local_at[static_cast<size_t>(k)] == k;
  if (in_place) {
    TESSEL_ASSIGN_OR_RETURN(Tensor ids, upload(table_rows));
    TESSEL_RETURN_IF_ERROR(gather.Call({&table, &ids}, {&out}, call));
    return SyncStream(device.device, device.stream);
  }
  // Otherwise stage [local rows; received rows] on the device, then put each in its place with a second
  // gather, from device memory.
  TESSEL_ASSIGN_OR_RETURN(Tensor stage, ScratchView(scratch->stage, DType::kF32, {L + R, F}, device));
  if (L > 0) {
    TESSEL_ASSIGN_OR_RETURN(Tensor ids, upload(table_rows));
    Tensor local = Tensor::Borrow(stage.raw(), DType::kF32, {L, F}, device.device);
    TESSEL_RETURN_IF_ERROR(gather.Call({&table, &ids}, {&local}, call));
  }
  if (R > 0) {
    TESSEL_RETURN_IF_ERROR(CopyMemory(stage.data<float>() + L * F, device.device, sources.received.data(), Device::kCpu,
                                      static_cast<size_t>(R * F) * sizeof(float), device.stream));
  }
  std::vector<int64_t> place(static_cast<size_t>(rows), -1);
  for (int64_t k = 0; k < L; ++k) place[static_cast<size_t>(sources.local_at[static_cast<size_t>(k)])] = k;
  for (int64_t j = 0; j < R; ++j) place[static_cast<size_t>(sources.remote_at[static_cast<size_t>(j)])] = L + j;
  for (int64_t i = 0; i < rows; ++i) {
    if (place[static_cast<size_t>(i)] < 0)
      return InternalError(StrCat("feature row ", i, " of the batch has no source"));
  }
  TESSEL_ASSIGN_OR_RETURN(Tensor ids, upload(place));
  TESSEL_RETURN_IF_ERROR(gather.Call({&stage, &ids}, {&out}, call));
  return SyncStream(device.device, device.stream);
}

Status RowStore::GatherAt(std::span<const int64_t> ids, std::span<const int64_t> at, float* out, int32_t rank) const {
  const int64_t F = dim();
  for (size_t k = 0; k < ids.size(); ++k) {
    TESSEL_RETURN_IF_ERROR(Gather(ids.subspan(k, 1), out + at[k] * F, rank));
  }
  return Status();
}

Status MemoryRowStore::GatherAt(std::span<const int64_t> ids, std::span<const int64_t> at, float* out,
                                int32_t rank) const {
  const auto row_bytes = static_cast<size_t>(dim_) * sizeof(float);
  for (size_t k = 0; k < ids.size(); ++k) {
    const float* row = Row(ids[k]);
    if (row == nullptr) return BadDataError(StrCat("worker ", rank, " holds no feature row for node ", ids[k]));
    std::memcpy(out + at[k] * dim_, row, row_bytes);
  }
  return Status();
}

Status FileRowStore::GatherAt(std::span<const int64_t> ids, std::span<const int64_t> at, float* out,
                              int32_t rank) const {
  const int64_t F = store_.feature_dim();
  const auto row_bytes = static_cast<size_t>(F) * sizeof(float);
  constexpr size_t kAhead = 8;  // rows in flight: the mapped rows are cold and scattered
  for (size_t k = 0; k < ids.size(); ++k) {
    if (k + kAhead < ids.size()) {
      if (const float* next = store_.Row(ids[k + kAhead])) __builtin_prefetch(next);
    }
    const float* row = store_.Row(ids[k]);
    if (row == nullptr) {
      return BadDataError(StrCat("worker ", rank, " was asked for the feature row of node ", ids[k],
                                 ", which it does not serve (", store_.num_rows(), " rows)"));
    }
    std::memcpy(out + at[k] * F, row, row_bytes);
  }
  return Status();
}

Status FileRowStore::Gather(std::span<const int64_t> ids, float* out, int32_t rank) const {
  const int64_t F = store_.feature_dim();
  const auto not_served = [&](int64_t id) {
    return BadDataError(StrCat("worker ", rank, " was asked for the feature row of node ", id,
                               ", which it does not serve (", store_.num_rows(), " rows)"));
  };
  if (gather_ == nullptr) {
    for (size_t i = 0; i < ids.size(); ++i) {
      const float* row = store_.Row(ids[i]);
      if (row == nullptr) return not_served(ids[i]);
      std::memcpy(out + static_cast<int64_t>(i) * F, row, static_cast<size_t>(F) * sizeof(float));
    }
    return Status();
  }
  // Runs of ids in one table, each one gather.rows call on this thread (no pool: the prefetch thread
  // must not share the training thread's).
  std::vector<int64_t> rows;
  CallOptions inline_call;
  for (size_t begin = 0; begin < ids.size();) {
    const storage::FeatureStore::RowRef first = store_.Locate(ids[begin]);
    if (!first.found()) return not_served(ids[begin]);
    rows.clear();
    size_t end = begin;
    for (; end < ids.size(); ++end) {
      const storage::FeatureStore::RowRef ref = store_.Locate(ids[end]);
      if (!ref.found()) return not_served(ids[end]);
      if (ref.table != first.table) break;
      rows.push_back(ref.row);
    }
    const storage::FeatureStore::Table t = store_.table(first.table);
    Tensor table = Tensor::Borrow(const_cast<float*>(t.data), DType::kF32, {t.rows, F}, Device::kCpu);
    Tensor index = Tensor::Borrow(rows.data(), DType::kI64, {static_cast<int64_t>(rows.size())}, Device::kCpu);
    Tensor y = Tensor::Borrow(out + static_cast<int64_t>(begin) * F, DType::kF32,
                              {static_cast<int64_t>(rows.size()), F}, Device::kCpu);
    TESSEL_RETURN_IF_ERROR(gather_->Call({&table, &index}, {&y}, inline_call));
    begin = end;
  }
  return Status();
}

SampledSource::SampledSource(RgnnSampledAssignment a, std::unique_ptr<RowStore> store, const ExecutorContext& context)
    : settings_(a.settings),
      sampling_(std::move(a.sampling)),
      rank_(a.worker),
      workers_(a.num_workers),
      feature_dim_(a.feature_dim),
      graph_(std::move(a.graph)),
      store_(std::move(store)),
      context_(context) {}

SampledSource::~SampledSource() {
  if (prefetch_thread_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    prefetch_thread_.join();
  }
}

int64_t SampledSource::input_dim() const { return settings_.input == ModelInput::kOneHot ? num_nodes() : feature_dim_; }

int64_t SampledSource::num_nodes() const { return graph_ != nullptr ? graph_->num_nodes : part_->num_nodes; }
int64_t SampledSource::num_classes() const { return graph_ != nullptr ? graph_->num_classes : part_->num_classes; }
int32_t SampledSource::num_relations() const {
  return graph_ != nullptr ? graph_->num_relations : part_->num_relations;
}
const std::vector<int64_t>& SampledSource::type_offsets() const {
  return graph_ != nullptr ? graph_->type_offsets : part_->type_offsets;
}

bool SampledSource::Owns(int64_t node) const {
  return graph_ != nullptr ? graph_->part_of[static_cast<size_t>(node)] == rank_ : part_->LocalOf(node) >= 0;
}

int64_t SampledSource::LabelOf(int64_t node) const {
  return graph_ != nullptr ? graph_->labels[static_cast<size_t>(node)]
                           : part_->labels[static_cast<size_t>(part_->LocalOf(node))];
}

namespace {

// The labelled training and test nodes of the whole graph, sorted, from each worker's own (partitioned
// structure): every worker sends its lists to every other. 8 bytes a labelled node.
Status GatherLabelled(const PartStructure& part, WorkerComm& comm, std::vector<int64_t>* train,
                      std::vector<int64_t>* test) {
  const auto W = static_cast<size_t>(comm.size());
  std::vector<int64_t> mine;  // [train count, train ids..., test ids...]
  std::vector<int64_t> own_test;
  mine.push_back(0);
  for (size_t i = 0; i < part.owned.size(); ++i) {
    if (part.labels[i] < 0) continue;
    if (part.train_mask[i] != 0) mine.push_back(part.owned[i]);
    if (part.test_mask[i] != 0) own_test.push_back(part.owned[i]);
  }
  mine[0] = static_cast<int64_t>(mine.size()) - 1;
  mine.insert(mine.end(), own_test.begin(), own_test.end());
  std::vector<std::vector<int64_t>> send(W, mine), recv;
  TESSEL_RETURN_IF_ERROR(comm.AllToAll(send, &recv));
  for (size_t q = 0; q < W; ++q) {
    const std::vector<int64_t>& r = recv[q];
    if (r.empty() || r[0] < 0 || r[0] >= static_cast<int64_t>(r.size())) {
      return BadDataError(StrCat("worker ", comm.rank(), ": worker ", q, "'s labelled nodes are malformed"));
    }
    train->insert(train->end(), r.begin() + 1, r.begin() + 1 + r[0]);
    test->insert(test->end(), r.begin() + 1 + r[0], r.end());
  }
  std::sort(train->begin(), train->end());
  std::sort(test->begin(), test->end());
  return Status();
}

}  // namespace

Result<std::unique_ptr<SampledSource>> SampledSource::Build(RgnnSampledAssignment assignment,
                                                            std::unique_ptr<RowStore> store,
                                                            const ExecutorContext& context) {
  if (context.comm->size() != assignment.num_workers || context.comm->rank() != assignment.worker) {
    return InternalError(StrCat("worker ", context.comm->rank(), " of ", context.comm->size(),
                                " got the sampled assignment of worker ", assignment.worker, " of ",
                                assignment.num_workers));
  }
  std::unique_ptr<PartStructure> part;
  if (assignment.partitioned()) {
    const storage::WorkerPartition& p = assignment.partition;
    if (p.part != assignment.worker || p.num_parts != assignment.num_workers) {
      return InternalError(StrCat("worker ", assignment.worker, " of ", assignment.num_workers, " got part ", p.part,
                                  " of ", p.num_parts));
    }
    TESSEL_ASSIGN_OR_RETURN(PartStructure built, PartStructure::FromPartition(p));
    part = std::make_unique<PartStructure>(std::move(built));
    assignment.partition = storage::WorkerPartition();  // its rows are in the store, its edges in `part`
  } else {
    TESSEL_RETURN_IF_ERROR(assignment.graph->Validate(assignment.num_workers));
  }
  const int64_t classes = part != nullptr ? part->num_classes : assignment.graph->num_classes;
  if (classes < 2) {
    return BadDataError(StrCat("the graph has ", classes, " classes; node classification needs at least 2"));
  }
  const bool features = assignment.settings.input == ModelInput::kFeatures;
  if (features && (store == nullptr || store->dim() != assignment.feature_dim)) {
    return InternalError("sampled training with feature input needs a feature store of the input width");
  }
  std::unique_ptr<SampledSource> s(new SampledSource(std::move(assignment), std::move(store), context));
  s->part_ = std::move(part);
  s->host_ = DeviceContext{};  // batches are prepared in host memory
  s->shape_view_.device = context.device;
  s->shape_view_.relations = s->num_relations();
  s->shape_view_.node_types = static_cast<int32_t>(s->type_offsets().size()) - 1;
  s->relation_names_.assign(static_cast<size_t>(s->num_relations()), std::string());
  std::vector<int32_t> eval = s->sampling_.eval_fanouts;
  if (eval.empty()) eval.assign(s->sampling_.fanouts.size(), -1);
  if (s->part_ != nullptr) {
    TESSEL_RETURN_IF_ERROR(GatherLabelled(*s->part_, *context.comm, &s->train_nodes_, &s->test_nodes_));
    s->train_sampler_ = std::make_unique<Sampler>(*s->part_, s->sampling_.fanouts, s->sampling_.fanout_per);
    s->eval_sampler_ = std::make_unique<Sampler>(*s->part_, std::move(eval), s->sampling_.fanout_per);
  } else {
    const SampledGraph& g = *s->graph_;
    for (int64_t v = 0; v < g.num_nodes; ++v) {
      if (g.labels[static_cast<size_t>(v)] < 0) continue;
      if (g.train_mask[static_cast<size_t>(v)] != 0) s->train_nodes_.push_back(v);
      if (g.test_mask[static_cast<size_t>(v)] != 0) s->test_nodes_.push_back(v);
    }
    s->train_sampler_ = std::make_unique<Sampler>(g, s->sampling_.fanouts, s->sampling_.fanout_per);
    s->eval_sampler_ = std::make_unique<Sampler>(g, std::move(eval), s->sampling_.fanout_per);
  }
  if (s->train_nodes_.empty()) return BadDataError("the graph has no labelled training nodes to sample from");
  TESSEL_RETURN_IF_ERROR(s->SetUpZeroCopy());
  if (s->sampling_.prefetch) {
    // Collective: every worker asks, and every worker gets the same answer from the same MPI library.
    Result<std::unique_ptr<WorkerComm>> dup = context.comm->Duplicate();
    if (dup.ok()) {
      s->prefetch_comm_ = std::move(dup).value();
      if (s->device_gather_ != nullptr) {
        TESSEL_ASSIGN_OR_RETURN(s->prefetch_stream_, CudaStream::Create());  // on the worker's device
      }
      s->prefetch_thread_ = std::thread([p = s.get()] { p->PrefetchLoop(); });
    } else if (context.log != nullptr) {
      context.log->Warn(StrCat("prefetch is off: ", dup.status().message()));
    }
  }
  return s;
}

Status SampledSource::SetUpZeroCopy() {
  if (settings_.input != ModelInput::kFeatures || sampling_.gather == FeatureGather::kHost) return Status();
  const auto* file = dynamic_cast<const FileRowStore*>(store_.get());
  std::string why;
  if (context_.device.device != Device::kCuda) {
    why = "this worker computes on the CPU";
  } else if (file == nullptr || file->store().mode() != FeatureStoreChoice::kPinned) {
    why = "its feature rows are not in the pinned store (data.feature_store)";
  } else if (Result<const Kernel*> k = context_.kernels->Find("gather.rows", Device::kCuda); !k.ok()) {
    why = StrCat("gather.rows has no CUDA kernel here (", k.status().message(), ")");
  } else {
    const storage::FeatureStore& rows = file->store();
    if (rows.num_rows() > 0) {
      TESSEL_ASSIGN_OR_RETURN(void* table, HostMemoryDevicePointer(rows.base()));
      device_table_ = Tensor::Borrow(table, DType::kF32, {rows.num_rows(), rows.feature_dim()}, Device::kCuda);
    }
    device_gather_ = k.value();
    return Status();
  }
  if (sampling_.gather == FeatureGather::kZeroCopy) {
    return UsageError(StrCat("worker ", rank_, ": data.feature_gather = \"zero_copy\", but ", why));
  }
  if (context_.device.device == Device::kCuda && context_.log != nullptr) {
    context_.log->Info(StrCat("feature rows are gathered on the host and copied to the GPU: ", why));
  }
  return Status();
}

Status SampledSource::Begin(Pass pass, int64_t epoch) {
  if (in_flight_) {
    // A pass left unfinished (an error upstream) may still have a batch in flight: collect it.
    TESSEL_RETURN_IF_ERROR(Take().status());
  }
  training_ = pass == Pass::kTrain;
  order_ = training_ ? train_nodes_ : test_nodes_;
  pass_key_ = MixKey(MixKey(context_.seed, training_ ? 1 : 2), static_cast<uint64_t>(epoch));
  if (training_) Shuffle(order_, pass_key_);
  batch_nodes_ = sampling_.batch_size;
  num_batches_ = (static_cast<int64_t>(order_.size()) + batch_nodes_ - 1) / batch_nodes_;
  next_index_ = 0;
  Release(std::move(current_));
  epoch_sample_s_ = epoch_layout_s_ = epoch_feature_s_ = epoch_wait_s_ = 0;
  if (prefetching() && num_batches_ > 0) Request(0);
  return Status();
}

Result<Tensor> SampledSource::TakeFeatureStorage(int64_t floats) {
  {
    std::lock_guard<std::mutex> lock(spare_mu_);
    for (size_t i = 0; i < spare_.size(); ++i) {
      if (spare_[i].numel() >= floats) {
        Tensor t = std::move(spare_[i]);
        spare_.erase(spare_.begin() + static_cast<std::ptrdiff_t>(i));
        return t;
      }
    }
  }
  // A little headroom, so that the next, slightly bigger batch fits too.
  Allocator& memory = device_gather_ != nullptr ? *context_.device.allocator : HostAllocator();
  return Tensor::Empty(DType::kF32, {std::max<int64_t>(1, floats + floats / 4)}, memory);
}

void SampledSource::Release(std::unique_ptr<Prepared> p) {
  if (p == nullptr || p->feature_storage.raw() == nullptr) return;
  // Device storage (zero-copy) is safe to refill at once: the executor ends every batch, training and
  // evaluation alike, on the host (its stream synchronised), before it asks for the next one.
  std::lock_guard<std::mutex> lock(spare_mu_);
  if (spare_.size() < 3) spare_.push_back(std::move(p->feature_storage));
}

Result<const Batch*> SampledSource::Next() {
  Release(std::move(current_));
  if (next_index_ >= num_batches_) return static_cast<const Batch*>(nullptr);
  const auto start = Clock::now();
  std::unique_ptr<Prepared> p;
  if (prefetching()) {
    TESSEL_ASSIGN_OR_RETURN(p, Take());
    if (next_index_ + 1 < num_batches_) Request(next_index_ + 1);
    epoch_wait_s_ += Seconds(Clock::now() - start).count();
  } else {
    p = std::make_unique<Prepared>();
    TESSEL_RETURN_IF_ERROR(Prepare(next_index_, *context_.comm, context_.device.stream, p.get()));
    epoch_wait_s_ += p->feature_s;  // in line, the training thread waits for every row
  }
  ++next_index_;
  epoch_sample_s_ += p->sample_s;
  epoch_layout_s_ += p->layout_s;
  epoch_feature_s_ += p->feature_s;
  rows_local_ += p->rows_local;
  rows_remote_ += p->rows_remote;
  rows_zero_copy_ += p->rows_zero_copy;
  TESSEL_RETURN_IF_ERROR(Upload(p.get()));
  batch_bytes_ = static_cast<int64_t>(p->feature_storage.nbytes() + p->labels.nbytes() + p->train_mask.nbytes() +
                                      p->test_mask.nbytes());
  for (const GraphView& v : p->views) batch_bytes_ += GraphViewBytes(v);
  current_ = std::move(p);
  return &current_->batch;
}

Status SampledSource::Prepare(int64_t index, WorkerComm& comm, void* stream, Prepared* p) {
  const auto t0 = Clock::now();
  const int64_t begin = index * batch_nodes_;
  const int64_t end = std::min<int64_t>(begin + batch_nodes_, static_cast<int64_t>(order_.size()));
  std::vector<int64_t> seeds;
  for (int64_t i = begin; i < end; ++i) {
    const int64_t v = order_[static_cast<size_t>(i)];
    if (Owns(v)) seeds.push_back(v);
  }
  std::sort(seeds.begin(), seeds.end());
  Batch& b = p->batch;
  b.seeds = static_cast<int64_t>(seeds.size());
  b.step_train_rows = training_ ? end - begin : 0;
  const uint64_t key = MixKey(pass_key_, static_cast<uint64_t>(index));
  std::vector<SampledBlock> blocks;
  // With partitioned structure every worker joins each layer's draw requests, seeds or not. Bad data in
  // them is returned after the feature exchange below, which this worker then joins with no rows, so
  // that no peer is left waiting in it.
  Status sampled;
  if (!seeds.empty() || part_ != nullptr) {
    Result<std::vector<SampledBlock>> drawn = (training_ ? train_sampler_ : eval_sampler_)->Sample(seeds, key, comm);
    if (drawn.ok()) {
      blocks = std::move(drawn).value();
    } else if (drawn.status().code() == Code::kRankFailed) {
      return drawn.status();
    } else {
      sampled = drawn.status();
    }
  }
  const auto t1 = Clock::now();
  p->sample_s = Seconds(t1 - t0).count();

  // Feature rows of the first layer's inputs: every worker joins the exchange, seeds or not.
  if (settings_.input == ModelInput::kFeatures) {
    const std::vector<int64_t> no_rows;
    const std::vector<int32_t> no_owners;
    const std::vector<int64_t>& ids = blocks.empty() ? no_rows : blocks.front().src_ids;
    const std::vector<int32_t>& owners = blocks.empty() ? no_owners : blocks.front().src_owner;
    const int64_t rows = static_cast<int64_t>(ids.size());
    TESSEL_ASSIGN_OR_RETURN(p->feature_storage, TakeFeatureStorage(rows * feature_dim_));
    if (device_gather_ == nullptr) {
      p->features = Tensor::Borrow(p->feature_storage.raw(), DType::kF32, {rows, feature_dim_}, Device::kCpu);
      TESSEL_RETURN_IF_ERROR(FetchFeatureRows(*store_, owners, rank_, ids, p->features.data<float>(), comm,
                                              &p->rows_local, &p->rows_remote));
    } else {
      thread_local FeatureRowSources sources;
      TESSEL_RETURN_IF_ERROR(ExchangeFeatureRows(*store_, owners, rank_, ids, comm, &sources));
      const storage::FeatureStore& served = static_cast<const FileRowStore&>(*store_).store();
      std::vector<int64_t> table_rows(sources.local_ids.size());
      for (size_t k = 0; k < table_rows.size(); ++k) {
        table_rows[k] = served.RowIndex(sources.local_ids[k]);
        if (table_rows[k] < 0) {
          return BadDataError(StrCat("worker ", rank_, " was asked for the feature row of node ", sources.local_ids[k],
                                     ", which it does not serve (", served.num_rows(), " rows)"));
        }
      }
      DeviceContext device = context_.device;
      device.stream = stream;
      p->features = Tensor::Borrow(p->feature_storage.raw(), DType::kF32, {rows, feature_dim_}, Device::kCuda);
      TESSEL_RETURN_IF_ERROR(
          AssembleFeatureRows(*device_gather_, device_table_, table_rows, sources, device, &assembly_, p->features));
      p->rows_local += static_cast<int64_t>(table_rows.size());
      p->rows_zero_copy += static_cast<int64_t>(table_rows.size());
      p->rows_remote += static_cast<int64_t>(sources.remote_at.size());
    }
  }
  const auto t2 = Clock::now();
  p->feature_s = Seconds(t2 - t1).count();
  TESSEL_RETURN_IF_ERROR(sampled);
  if (seeds.empty()) return Status();
  const std::vector<int64_t>& type_offsets = this->type_offsets();

  const RgnnModel* model = FindRgnnModel(settings_.model);
  const bool pairs = model != nullptr && model->ReadsRelationPairs(settings_);
  const int64_t threads = context_.pool != nullptr ? context_.pool->num_threads() : 1;
  p->views.resize(blocks.size());
  for (size_t l = 0; l < blocks.size(); ++l) {
    SampledBlock& block = blocks[l];
    GraphView& v = p->views[l];
    v.device = host_;
    v.rows = static_cast<int64_t>(block.src_ids.size());
    v.owned = block.num_dst;
    v.relations = num_relations();
    v.node_types = shape_view_.node_types;
    std::vector<int32_t> types(block.src_ids.size());
    for (size_t i = 0; i < types.size(); ++i) types[i] = NodeTypeOf(type_offsets, block.src_ids[i]);
    v.type_runs = TypeRunsOf(types, v.owned);
    TESSEL_ASSIGN_OR_RETURN(v.row_type, HostTensor(types, {v.rows}));
    TESSEL_ASSIGN_OR_RETURN(v.row_id, HostTensor(block.src_ids, {v.rows}));
    storage::WorkerPartition part;
    part.part = rank_;
    part.num_parts = workers_;
    part.num_owned = block.num_dst;
    part.row_new_id = std::move(block.src_ids);
    part.relation_names = relation_names_;
    part.rel_ptr = std::move(block.rel_ptr);
    part.src = std::move(block.src);
    part.dst = std::move(block.dst);
    if (pairs) {
      TESSEL_ASSIGN_OR_RETURN(v.pairs, RelationLayout::Build(part, settings_.compaction));
    } else {
      const int64_t block_edges = SegmentLayout::BlockEdgesFor(static_cast<int64_t>(part.dst.size()), threads);
      TESSEL_ASSIGN_OR_RETURN(
          v.segments,
          SegmentLayout::Build(part, host_, {.compaction = settings_.compaction, .target_block_edges = block_edges}));
    }
    b.views.push_back(&v);
  }
  // The seeds are the last layer's output rows, in id order.
  std::vector<int64_t> labels(seeds.size());
  std::vector<uint8_t> train(seeds.size(), training_ ? 1 : 0), test(seeds.size(), training_ ? 0 : 1);
  for (size_t i = 0; i < seeds.size(); ++i) labels[i] = LabelOf(seeds[i]);
  const auto n = static_cast<int64_t>(seeds.size());
  TESSEL_ASSIGN_OR_RETURN(p->labels, HostTensor(labels, {n}));
  TESSEL_ASSIGN_OR_RETURN(p->train_mask, HostTensor(train, {n}));
  TESSEL_ASSIGN_OR_RETURN(p->test_mask, HostTensor(test, {n}));
  b.labels = &p->labels;
  b.train_mask = &p->train_mask;
  b.test_mask = &p->test_mask;
  b.labelled_train = training_ ? n : 0;
  b.labelled_test = training_ ? 0 : n;
  b.features = settings_.input == ModelInput::kFeatures ? &p->features : nullptr;
  p->layout_s = Seconds(Clock::now() - t2).count();
  return Status();
}

Status SampledSource::Upload(Prepared* p) {
  const DeviceContext& d = context_.device;
  if (d.device == Device::kCpu) return Status();
  for (GraphView& v : p->views) {
    v.device = d;
    TESSEL_RETURN_IF_ERROR(MoveToDevice(v.segments, d));
    TESSEL_RETURN_IF_ERROR(MoveToDevice(v.pairs, d));
    TESSEL_RETURN_IF_ERROR(MoveToDevice(v.row_type, d));
    TESSEL_RETURN_IF_ERROR(MoveToDevice(v.row_id, d));
  }
  for (Tensor* t : {&p->features, &p->labels, &p->train_mask, &p->test_mask}) {
    if (t->device() == d.device) continue;  // zero-copy features are there already
    TESSEL_RETURN_IF_ERROR(MoveToDevice(*t, d));
  }
  return Status();
}

void SampledSource::PrefetchLoop() {
  // CUDA's current device is per thread: this one queues the zero-copy gathers on the worker's. A thread
  // that cannot select it fails every batch it is asked for, rather than gather on another device.
  Status device;
  if (context_.device.device == Device::kCuda) device = SelectCudaDevice(context_.device.ordinal);
  for (;;) {
    int64_t index = -1;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stop_ || requested_ >= 0; });
      if (stop_) return;
      index = requested_;
    }
    auto p = std::make_unique<Prepared>();
    p->status = device.ok() ? Prepare(index, *prefetch_comm_, prefetch_stream_.get(), p.get())
                            : Status(device.code(), StrCat("prefetch thread: ", device.message()));
    {
      std::lock_guard<std::mutex> lock(mu_);
      requested_ = -1;
      ready_ = std::move(p);
    }
    cv_.notify_all();
  }
}

void SampledSource::Request(int64_t index) {
  in_flight_ = true;
  {
    std::lock_guard<std::mutex> lock(mu_);
    requested_ = index;
  }
  cv_.notify_all();
}

Result<std::unique_ptr<SampledSource::Prepared>> SampledSource::Take() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return ready_ != nullptr; });
  in_flight_ = false;
  std::unique_ptr<Prepared> p = std::move(ready_);
  if (!p->status.ok()) return p->status;
  return p;
}

SourceFigures SampledSource::Figures() const {
  SourceFigures f;
  f.sampled = true;
  f.feature_rows_local = rows_local_;
  f.feature_rows_remote = rows_remote_;
  f.feature_rows_zero_copy = rows_zero_copy_;
  f.feature_row_bytes = feature_dim_ * static_cast<int64_t>(sizeof(float));
  if (settings_.input == ModelInput::kFeatures) f.feature_gather = device_gather_ != nullptr ? "zero_copy" : "host";
  f.prefetch = prefetching();
  f.sample_seconds = epoch_sample_s_;
  f.layout_seconds = epoch_layout_s_;
  f.feature_seconds = epoch_feature_s_;
  f.feature_wait_seconds = epoch_wait_s_;
  // The sampling structure (replicated: every worker holds it whole; partitioned: the worker's share)
  // and the latest batch's blocks, feature rows, labels and masks; a prefetched batch, about as big, is
  // not counted.
  f.graph_bytes = (graph_ != nullptr ? graph_->Bytes() : part_->Bytes()) + batch_bytes_;
  f.structure = graph_ != nullptr ? "replicated" : "partitioned";
  return f;
}

}  // namespace tessel::workers
