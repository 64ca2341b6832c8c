#include "orchestrator/partitioning/ptscotch_parts.h"

#include <stdio.h>  // ptscotch.h needs FILE
// clang-format off
#include <scotch.h>
#include <ptscotch.h>
// clang-format on

#include "core/logging.h"

namespace tessel::orchestrator {

static_assert(sizeof(SCOTCH_Num) == sizeof(int64_t), "the distributed partitioner needs PT-Scotch's int64 build");

namespace {

// The context, the graph (as built, and bound to the context) and the strategy, freed on every path.
// The context makes PT-Scotch deterministic (its threads and random state), one thread per rank.
class Scotch {
 public:
  Scotch(MPI_Comm comm, uint64_t seed) {
    context_ok_ = SCOTCH_contextInit(&context_) == 0;
    if (context_ok_) {
      SCOTCH_contextOptionSetNum(&context_, SCOTCH_OPTIONNUMDETERMINISTIC, 1);
      SCOTCH_contextOptionSetNum(&context_, SCOTCH_OPTIONNUMRANDOMFIXEDSEED, 1);
      SCOTCH_contextRandomSeed(&context_, static_cast<SCOTCH_Num>(seed & 0x7fffffff));
    }
    graph_ok_ = SCOTCH_dgraphInit(&graph_, comm) == 0;
    strat_ok_ = SCOTCH_stratInit(&strat_) == 0;
  }
  ~Scotch() {
    if (strat_ok_) SCOTCH_stratExit(&strat_);
    if (bound_ok_) SCOTCH_dgraphExit(&bound_);
    if (graph_ok_) SCOTCH_dgraphExit(&graph_);
    if (context_ok_) SCOTCH_contextExit(&context_);
  }
  Scotch(const Scotch&) = delete;
  Scotch& operator=(const Scotch&) = delete;
  bool ok() const { return context_ok_ && graph_ok_ && strat_ok_; }
  SCOTCH_Dgraph* graph() { return &graph_; }
  SCOTCH_Strat* strat() { return &strat_; }
  // The built graph as the context sees it (after SCOTCH_dgraphBuild).
  Result<SCOTCH_Dgraph*> Bound() {
    if (!bound_ok_) {
      if (SCOTCH_contextThreadSpawn(&context_, 1, nullptr) != 0 ||
          SCOTCH_contextBindDgraph(&context_, &graph_, &bound_) != 0) {
        return InternalError("SCOTCH_contextBindDgraph failed (PT-Scotch's message is on stderr)");
      }
      bound_ok_ = true;
    }
    return &bound_;
  }

 private:
  SCOTCH_Context context_;
  SCOTCH_Dgraph graph_, bound_;
  SCOTCH_Strat strat_;
  bool context_ok_ = false, graph_ok_ = false, bound_ok_ = false, strat_ok_ = false;
};

Status Check(int rc, const char* what) {
  return rc == 0 ? Status::Ok() : InternalError(StrCat(what, " failed (PT-Scotch's message is on stderr)"));
}

}  // namespace

Result<std::vector<int32_t>> PtScotchParts(const RankGroup& group, const std::vector<int64_t>& vtxdist,
                                           const std::vector<int64_t>& ptr, const std::vector<int64_t>& adj,
                                           const std::vector<int64_t>& weight, int32_t parts, uint64_t seed) {
  const int64_t n = static_cast<int64_t>(ptr.size()) - 1;
  if (n != vtxdist[static_cast<size_t>(group.rank()) + 1] - vtxdist[static_cast<size_t>(group.rank())] ||
      static_cast<int64_t>(weight.size()) != n) {
    return InternalError("PtScotchParts: the local vertex count disagrees with vtxdist or the weights");
  }
  Scotch s(group.comm(), seed);
  if (!s.ok()) return InternalError("SCOTCH_dgraphInit failed");
  // PT-Scotch reads these arrays and never writes them; its C API is not const.
  auto* vert = const_cast<SCOTCH_Num*>(reinterpret_cast<const SCOTCH_Num*>(ptr.data()));
  auto* edges = const_cast<SCOTCH_Num*>(reinterpret_cast<const SCOTCH_Num*>(adj.data()));
  auto* velo = const_cast<SCOTCH_Num*>(reinterpret_cast<const SCOTCH_Num*>(weight.data()));
  const auto m = static_cast<SCOTCH_Num>(adj.size());
  TESSEL_RETURN_IF_ERROR(
      Check(SCOTCH_dgraphBuild(s.graph(), 0, n, n, vert, vert + 1, velo, nullptr, m, m, edges, nullptr, nullptr),
            "SCOTCH_dgraphBuild"));
  TESSEL_RETURN_IF_ERROR(Check(SCOTCH_stratDgraphMapBuild(s.strat(), SCOTCH_STRATQUALITY, group.size(), parts, 0.03),
                               "SCOTCH_stratDgraphMapBuild"));
  std::vector<SCOTCH_Num> part(static_cast<size_t>(n) + 1, 0);  // + 1: a valid pointer for an empty home
  TESSEL_ASSIGN_OR_RETURN(SCOTCH_Dgraph* const bound, s.Bound());
  TESSEL_RETURN_IF_ERROR(Check(SCOTCH_dgraphPart(bound, parts, s.strat(), part.data()), "SCOTCH_dgraphPart"));
  std::vector<int32_t> out(static_cast<size_t>(n));
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<int32_t>(part[i]);
  return out;
}

}  // namespace tessel::orchestrator
