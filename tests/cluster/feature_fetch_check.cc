// Run under mpirun with every rank a worker (no coordinator): checks the distributed feature path of
// sampled training against the graph file. Each rank serves the feature rows of the nodes a seeded
// random partition gives it, from a FeatureStore over GRAPH (mapped, then pinned), and fetches rows for
// random batches of node ids through FetchFeatureRows (its own rows from the store, the others over the
// batched MPI exchange); every row must equal the same row read directly from the file with ReadGraph.
// Then rank 1 asks for a node id past the graph's end: it must get kBadData naming "worker 1" while
// the other ranks finish the same exchange normally (nobody is left waiting).
//
//   mpirun -np 3 tessel-feature-fetch-check GRAPH.h5
// Exit 0 when every check passes; 1 with a message naming the rank, batch and row otherwise.
#include <mpi.h>

#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "storage/feature_store.h"
#include "storage/graph.h"
#include "workers/comm/mpi_comm.h"
#include "workers/rgnn/sampled_source.h"

namespace {

// The owner of each id (-1 for an id outside the graph).
std::vector<int32_t> OwnersOf(const std::vector<int32_t>& part_of, const std::vector<int64_t>& ids) {
  std::vector<int32_t> owners(ids.size(), -1);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] >= 0 && ids[i] < static_cast<int64_t>(part_of.size())) owners[i] = part_of[static_cast<size_t>(ids[i])];
  }
  return owners;
}

using namespace tessel;

int Fail(int rank, const std::string& what) {
  std::fprintf(stderr, "FAIL rank %d: %s\n", rank, what.c_str());
  return 1;
}

int Check(const std::string& path, workers::WorkerComm& comm) {
  const int rank = comm.rank(), size = comm.size();
  Result<storage::HeteroGraph> graph = storage::ReadGraph(path);
  if (!graph.ok()) return Fail(rank, graph.status().ToString());
  const int64_t n = graph->num_nodes(), dim = graph->node_types.front().feature_dim;
  std::vector<float> all;  // every row, straight from the file, in global id order
  for (const storage::NodeType& t : graph->node_types) all.insert(all.end(), t.features.begin(), t.features.end());
  if (static_cast<int64_t>(all.size()) != n * dim || dim == 0) return Fail(rank, "the graph needs uniform features");
  std::mt19937_64 part_rng(7);  // the same partition on every rank
  std::vector<int32_t> part_of(static_cast<size_t>(n));
  for (auto& p : part_of) p = static_cast<int32_t>(part_rng() % static_cast<uint64_t>(size));
  std::vector<int64_t> owned;
  for (int64_t v = 0; v < n; ++v) {
    if (part_of[static_cast<size_t>(v)] == rank) owned.push_back(v);
  }
  int64_t checked = 0, remote_total = 0;
  for (const auto mode : {storage::FeatureStore::Mode::kMapped, storage::FeatureStore::Mode::kPinned}) {
    const char* mode_name = mode == storage::FeatureStore::Mode::kMapped ? "mapped" : "pinned";
    storage::FeatureStore::Options options;
    options.mode = mode;
    options.allocator = &HostAllocator();
    Result<storage::FeatureStore> store = storage::FeatureStore::Open(path, owned, options);
    if (!store.ok()) return Fail(rank, StrCat(mode_name, ": ", store.status().ToString()));
    workers::FileRowStore rows(std::move(store).value());
    std::mt19937_64 rng(100 + static_cast<uint64_t>(rank));  // each rank its own batches
    for (int batch = 0; batch < 20; ++batch) {
      const auto count = static_cast<size_t>(rng() % 2000);  // sometimes few or none
      std::vector<int64_t> ids(count);
      for (auto& id : ids) id = static_cast<int64_t>(rng() % static_cast<uint64_t>(n));
      if (count > 2) ids[1] = ids[0];  // a repeated row
      std::vector<float> out(count * static_cast<size_t>(dim), -1.0f);
      int64_t local = 0, remote = 0;
      const Status s =
          workers::FetchFeatureRows(rows, OwnersOf(part_of, ids), rank, ids, out.data(), comm, &local, &remote);
      if (!s.ok()) return Fail(rank, StrCat(mode_name, " batch ", batch, ": ", s.ToString()));
      if (local + remote != static_cast<int64_t>(count)) {
        return Fail(rank,
                    StrCat(mode_name, " batch ", batch, ": ", local, " local + ", remote, " remote rows of ", count));
      }
      remote_total += remote;
      for (size_t i = 0; i < count; ++i) {
        const float* want = all.data() + ids[i] * dim;
        if (std::memcmp(out.data() + i * static_cast<size_t>(dim), want, static_cast<size_t>(dim) * sizeof(float)) !=
            0) {
          return Fail(rank, StrCat(mode_name, " batch ", batch, " row ", i, " (node ", ids[i], ", owner ",
                                   part_of[static_cast<size_t>(ids[i])], ") differs from the file"));
        }
      }
      checked += static_cast<int64_t>(count);
    }
    // A node id past the end on rank 1: a clean error there, and the exchange completes everywhere.
    std::vector<int64_t> ids = {0, 1, 2};
    if (rank == 1) ids.push_back(n + 5);
    std::vector<float> out(ids.size() * static_cast<size_t>(dim));
    int64_t local = 0, remote = 0;
    const Status s =
        workers::FetchFeatureRows(rows, OwnersOf(part_of, ids), rank, ids, out.data(), comm, &local, &remote);
    if (rank == 1) {
      if (s.code() != Code::kBadData || s.message().find("worker 1") == std::string::npos ||
          s.message().find(std::to_string(n + 5)) == std::string::npos) {
        return Fail(rank, StrCat(mode_name, ": an out-of-range id gave ", s.ToString()));
      }
    } else if (!s.ok()) {
      return Fail(rank, StrCat(mode_name, ": a peer's bad id failed this rank too: ", s.ToString()));
    }
  }
  if (size > 1 && remote_total == 0) return Fail(rank, "no row came from another rank");
  std::printf(
      "rank %d: %lld rows of %lld floats equal to the file (%lld from other ranks), mapped and pinned; "
      "an out-of-range id is a clean error on rank 1\n",
      rank, static_cast<long long>(checked), static_cast<long long>(dim), static_cast<long long>(remote_total));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: mpirun -np N %s GRAPH.h5\n", argv[0]);
    return 2;
  }
  auto session = tessel::workers::MpiSession::Init(&argc, &argv);
  if (!session.ok()) return Fail(-1, session.status().ToString());
  auto comm = tessel::workers::MpiWorkerComm::OverWorkers(/*is_worker=*/true);
  if (!comm.ok()) return Fail(-1, comm.status().ToString());
  const int rc = Check(argv[1], **comm);
  int worst = 0;
  MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return worst;
}
