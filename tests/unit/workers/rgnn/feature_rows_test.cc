// A sampled batch's feature rows, assembled by AssembleFeatureRows (the zero-copy path of GPU workers)
// against FetchFeatureRows (the host path), with the gather plugin's real kernels:
//  - on the CPU: every row local and in order (one gather in place), rows out of order, and rows
//    received from a peer (staged, then put in place), one and two workers (threads over ThreadComm);
//  - sources that do not cover the batch exactly once are refused;
//  - on a GPU (skipped without one): the table in mapped page-locked memory read through its device
//    pointer, as a GPU worker's pinned store is, giving the host path's rows bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>

#include "core/allocator.h"
#include "core/cuda_device.h"
#include "tests/unit/workers/rgnn/thread_comm.h"
#include "workers/comm/comm.h"
#include "workers/plugin_host/kernel_registry.h"
#include "workers/rgnn/sampled_source.h"

namespace tessel::workers {
namespace {

using testing::ThreadGroup;

constexpr int64_t kNodes = 300, kDim = 12;

KernelRegistry LoadGather() {
  KernelRegistry registry;
  Status st = registry.LoadPlugin(std::string(TESSEL_BINARY_DIR) + "/plugins/libtessel_gather.so");
  EXPECT_TRUE(st.ok()) << st.ToString();
  return registry;
}

float Value(int64_t node, int64_t col) { return static_cast<float>(node) + 0.001f * static_cast<float>(col); }

// Node v's owner among `workers`.
int32_t OwnerOf(int64_t v, int workers) { return static_cast<int32_t>((v * 7 + v / 5) % workers); }

// What worker `rank` serves: its nodes in id order, and their rows packed in that order (the pinned
// store's single table).
struct Served {
  std::vector<int64_t> ids;
  std::vector<float> rows;
};
Served ServedBy(int rank, int workers) {
  Served s;
  for (int64_t v = 0; v < kNodes; ++v) {
    if (OwnerOf(v, workers) != rank) continue;
    s.ids.push_back(v);
    for (int64_t c = 0; c < kDim; ++c) s.rows.push_back(Value(v, c));
  }
  return s;
}

std::vector<int64_t> BatchIds(uint64_t seed, int64_t rows) {
  std::mt19937_64 rng(seed);
  std::vector<int64_t> ids(static_cast<size_t>(rows));
  for (int64_t& id : ids) id = static_cast<int64_t>(rng() % kNodes);
  return ids;
}

std::vector<int64_t> TableRows(const Served& served, const std::vector<int64_t>& local_ids) {
  std::vector<int64_t> rows;
  for (const int64_t id : local_ids) {
    rows.push_back(std::lower_bound(served.ids.begin(), served.ids.end(), id) - served.ids.begin());
  }
  return rows;
}

// Each worker of `workers` fetches `ids` both ways; the assembled rows must equal the fetched ones and
// the planted values.
void CompareWithFetch(int workers, const std::vector<int64_t>& ids) {
  const KernelRegistry kernels = LoadGather();
  Result<const Kernel*> gather = kernels.Find("gather.rows", Device::kCpu);
  ASSERT_TRUE(gather.ok()) << gather.status().ToString();
  std::vector<int32_t> owners(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) owners[i] = OwnerOf(ids[i], workers);
  ThreadGroup group(workers);
  ThreadGroup::Run(workers, [&](int rank) {
    std::unique_ptr<WorkerComm> comm = testing::CommOf(&group, rank);
    Served served = ServedBy(rank, workers);
    const std::vector<float> table_rows_data = served.rows;
    MemoryRowStore store(served.ids, std::move(served.rows), kDim);
    const auto M = static_cast<int64_t>(ids.size());
    std::vector<float> fetched(static_cast<size_t>(M * kDim), -1);
    int64_t local = 0, remote = 0;
    ASSERT_TRUE(FetchFeatureRows(store, owners, rank, ids, fetched.data(), *comm, &local, &remote).ok());

    FeatureRowSources sources;
    ASSERT_TRUE(ExchangeFeatureRows(store, owners, rank, ids, *comm, &sources).ok());
    EXPECT_EQ(static_cast<int64_t>(sources.local_ids.size()), local);
    EXPECT_EQ(static_cast<int64_t>(sources.remote_at.size()), remote);
    Tensor table = Tensor::Borrow(const_cast<float*>(table_rows_data.data()), DType::kF32,
                                  {static_cast<int64_t>(served.ids.size()), kDim});
    std::vector<float> assembled(static_cast<size_t>(M * kDim), -2);
    Tensor out = Tensor::Borrow(assembled.data(), DType::kF32, {M, kDim});
    RowAssembly scratch;
    const Status st = AssembleFeatureRows(**gather, table, TableRows(served, sources.local_ids), sources,
                                          DeviceContext{}, &scratch, out);
    ASSERT_TRUE(st.ok()) << st.ToString();
    EXPECT_EQ(assembled, fetched) << "worker " << rank;
    for (int64_t i = 0; i < M; ++i) {
      for (int64_t c = 0; c < kDim; ++c) {
        ASSERT_EQ(assembled[static_cast<size_t>(i * kDim + c)], Value(ids[static_cast<size_t>(i)], c))
            << "worker " << rank << " row " << i << " column " << c;
      }
    }
    if (workers > 1 && !ids.empty()) {
      EXPECT_GT(remote, 0) << "worker " << rank << " received no rows: the staged path went untried";
    }
  });
}

TEST(AssembleFeatureRows, OneWorkerGathersInPlace) { CompareWithFetch(1, BatchIds(1, 500)); }

TEST(AssembleFeatureRows, TwoWorkersStageTheReceivedRowsAndPlaceEveryRow) { CompareWithFetch(2, BatchIds(2, 500)); }

TEST(AssembleFeatureRows, ThreeWorkers) { CompareWithFetch(3, BatchIds(3, 257)); }

TEST(AssembleFeatureRows, AnEmptyBatch) { CompareWithFetch(2, {}); }

// Local rows out of batch order take the staged path even with nothing received.
TEST(AssembleFeatureRows, LocalRowsOutOfOrderArePutInPlace) {
  const KernelRegistry kernels = LoadGather();
  const Kernel* gather = kernels.Find("gather.rows", Device::kCpu).value();
  Served served = ServedBy(0, 1);
  Tensor table = Tensor::Borrow(served.rows.data(), DType::kF32, {kNodes, kDim});
  FeatureRowSources sources;
  sources.local_ids = {5, 9, 2};
  sources.local_at = {2, 0, 1};
  std::vector<float> y(3 * kDim, -1);
  Tensor out = Tensor::Borrow(y.data(), DType::kF32, {3, kDim});
  RowAssembly scratch;
  ASSERT_TRUE(AssembleFeatureRows(*gather, table, sources.local_ids, sources, DeviceContext{}, &scratch, out).ok());
  EXPECT_EQ(y[0], Value(9, 0));
  EXPECT_EQ(y[kDim], Value(2, 0));
  EXPECT_EQ(y[2 * kDim + 3], Value(5, 3));
}

TEST(AssembleFeatureRows, SourcesThatDoNotCoverTheBatchAreRefused) {
  const KernelRegistry kernels = LoadGather();
  const Kernel* gather = kernels.Find("gather.rows", Device::kCpu).value();
  Served served = ServedBy(0, 1);
  Tensor table = Tensor::Borrow(served.rows.data(), DType::kF32, {kNodes, kDim});
  std::vector<float> y(3 * kDim);
  Tensor out = Tensor::Borrow(y.data(), DType::kF32, {3, kDim});
  RowAssembly scratch;
  FeatureRowSources twice;  // three rows, but position 1 twice and position 2 never
  twice.local_ids = {1, 2, 3};
  twice.local_at = {0, 1, 1};
  Status st = AssembleFeatureRows(*gather, table, twice.local_ids, twice, DeviceContext{}, &scratch, out);
  EXPECT_EQ(st.code(), Code::kInternal) << st.ToString();
  FeatureRowSources short_by_one;
  short_by_one.local_ids = {1, 2};
  short_by_one.local_at = {0, 1};
  st = AssembleFeatureRows(*gather, table, short_by_one.local_ids, short_by_one, DeviceContext{}, &scratch, out);
  EXPECT_EQ(st.code(), Code::kInternal) << st.ToString();
  EXPECT_NE(st.message().find("3 feature rows"), std::string::npos) << st.ToString();
}

// The GPU reads the table in place from mapped page-locked memory (as from a GPU worker's pinned
// store): local rows in order (in place) and out of order with received rows (staged).
TEST(AssembleFeatureRows, ZeroCopyOnTheGpuGivesTheHostRows) {
  if (!ProbeCuda().usable()) GTEST_SKIP() << "no usable GPU: " << ProbeCuda().problem;
  const KernelRegistry kernels = LoadGather();
  Result<const Kernel*> gather = kernels.Find("gather.rows", Device::kCuda);
  if (!gather.ok()) GTEST_SKIP() << "gather.rows has no CUDA kernel in this build: " << gather.status().ToString();
  ASSERT_TRUE(SelectCudaDevice(0).ok());
  Result<CudaStream> stream = CudaStream::Create();
  ASSERT_TRUE(stream.ok()) << stream.status().ToString();
  DeviceContext device;
  device.device = Device::kCuda;
  device.allocator = &CudaAllocator();
  device.stream = stream->get();

  Served served = ServedBy(0, 1);
  Result<Tensor> pinned = Tensor::Empty(DType::kF32, {kNodes, kDim}, PinnedAllocator());
  ASSERT_TRUE(pinned.ok());
  std::memcpy(pinned->raw(), served.rows.data(), served.rows.size() * sizeof(float));
  Result<void*> through = HostMemoryDevicePointer(pinned->raw());
  ASSERT_TRUE(through.ok()) << through.status().ToString();
  Tensor table = Tensor::Borrow(*through, DType::kF32, {kNodes, kDim}, Device::kCuda);

  for (const bool staged : {false, true}) {
    SCOPED_TRACE(staged ? "staged" : "in place");
    const std::vector<int64_t> ids = BatchIds(staged ? 5 : 4, 700);
    FeatureRowSources sources;
    const int64_t received = staged ? 50 : 0;
    for (int64_t i = 0; i < static_cast<int64_t>(ids.size()) - received; ++i) {
      sources.local_ids.push_back(ids[static_cast<size_t>(i)]);
      sources.local_at.push_back(i);
    }
    if (staged) {
      std::reverse(sources.local_at.begin(), sources.local_at.end());  // row k goes to the mirrored place
      std::vector<int64_t> reordered(sources.local_ids.size());
      for (size_t k = 0; k < reordered.size(); ++k) reordered[k] = ids[static_cast<size_t>(sources.local_at[k])];
      sources.local_ids = reordered;
      for (int64_t i = static_cast<int64_t>(ids.size()) - received; i < static_cast<int64_t>(ids.size()); ++i) {
        sources.remote_at.push_back(i);
        for (int64_t c = 0; c < kDim; ++c) sources.received.push_back(Value(ids[static_cast<size_t>(i)], c));
      }
    }
    const auto M = static_cast<int64_t>(ids.size());
    Result<Tensor> out = Tensor::Empty(DType::kF32, {M, kDim}, CudaAllocator());
    ASSERT_TRUE(out.ok());
    RowAssembly scratch;
    const Status st = AssembleFeatureRows(**gather, table, sources.local_ids, sources, device, &scratch, *out);
    ASSERT_TRUE(st.ok()) << st.ToString();
    std::vector<float> y(static_cast<size_t>(M * kDim));
    ASSERT_TRUE(CopyMemory(y.data(), Device::kCpu, out->raw(), Device::kCuda, y.size() * sizeof(float)).ok());
    for (int64_t i = 0; i < M; ++i) {
      for (int64_t c = 0; c < kDim; ++c) {
        ASSERT_EQ(y[static_cast<size_t>(i * kDim + c)], Value(ids[static_cast<size_t>(i)], c)) << "row " << i;
      }
    }
  }
}

}  // namespace
}  // namespace tessel::workers
