// PT-Scotch's k-way partition of a distributed graph (its int64 build: SCOTCH_Num is 64 bits, checked at
// compile time). Rank r holds vertices [vtxdist[r], vtxdist[r + 1]) of the global numbering, their
// symmetric adjacency as a CSR of global neighbour ids (no self-loops, no duplicates) and one weight each.
// Returns each local vertex's part in [0, parts). Deterministic for a given seed and rank count.
// Failure: kInternal naming the PT-Scotch call that failed (its own message goes to stderr).
// Thread safety: a collective over the group's ranks; one call at a time.
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "orchestrator/partitioning/rank_group.h"

namespace tessel::orchestrator {

Result<std::vector<int32_t>> PtScotchParts(const RankGroup& group, const std::vector<int64_t>& vtxdist,
                                           const std::vector<int64_t>& ptr, const std::vector<int64_t>& adj,
                                           const std::vector<int64_t>& weight, int32_t parts, uint64_t seed);

}  // namespace tessel::orchestrator
