// The streaming partitioner (`tessel partition --input DIR --method stream`): linear deterministic greedy
// (LDG, Stanton and Kliot, KDD 2012) over the distributed home graph, in memory linear in a rank's share
// and with no library's copy of the graph: the fallback where PT-Scotch's multilevel memory is not wanted.
// Each rank streams its home nodes in id order over `kStreamRounds` rounds; a node goes to the part that
// holds most of its already placed neighbours, scaled by that part's free capacity, among the parts it
// fits in. Neighbours on other homes are seen as they were placed by the end of the previous round.
// Then it streams them again (restreaming, Nishimura and Ugander, KDD 2013): each node leaves its part
// and is placed anew, now seeing where all of its neighbours went.
// Capacities are each rank's share: every constraint of every part stays within `target` of the rank's
// own totals, so within it over the whole graph, except where a node outweighs the slack left (a hub):
// the repair pass (rebalancer.h) runs after it as after PT-Scotch.
// Deterministic for a given rank count. Thread safety: a collective over the group's ranks.
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "orchestrator/partitioning/home_graph.h"
#include "orchestrator/partitioning/rank_group.h"

namespace tessel::orchestrator {

inline constexpr int kStreamRounds = 8;
inline constexpr int kStreamPasses = 4;

// `ptr`/`adj`: the home nodes' adjacency (BuildAdjacency); `neighbours`: adj's ids sorted and unique;
// `w`: [home nodes * ncon] weights.
Result<std::vector<int32_t>> StreamParts(const RankGroup& group, const Layout& layout, const Home& home,
                                         const std::vector<int64_t>& ptr, const std::vector<int64_t>& adj,
                                         const std::vector<int64_t>& neighbours, const std::vector<int64_t>& w,
                                         int32_t ncon, int32_t parts, double target);

}  // namespace tessel::orchestrator
