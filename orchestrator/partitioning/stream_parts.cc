#include "orchestrator/partitioning/stream_parts.h"

#include <algorithm>
#include <limits>

namespace tessel::orchestrator {

Result<std::vector<int32_t>> StreamParts(const RankGroup& group, const Layout& layout, const Home& home,
                                         const std::vector<int64_t>& ptr, const std::vector<int64_t>& adj,
                                         const std::vector<int64_t>& neighbours, const std::vector<int64_t>& w,
                                         int32_t ncon, int32_t parts, double target) {
  const auto n = static_cast<size_t>(home.size());
  const auto nc = static_cast<size_t>(ncon);
  std::vector<int32_t> part(n, -1);
  std::vector<double> cap(nc, 0.0);
  for (size_t i = 0; i < n; ++i) {
    for (size_t c = 0; c < nc; ++c) cap[c] += static_cast<double>(w[i * nc + c]);
  }
  for (double& c : cap) c = std::max(1.0, target * c / parts);
  std::vector<double> load(static_cast<size_t>(parts) * nc, 0.0);
  std::vector<int64_t> conn(static_cast<size_t>(parts), 0);
  for (int step = 0; step < kStreamPasses * kStreamRounds; ++step) {
    TESSEL_ASSIGN_OR_RETURN(const std::vector<int32_t> remote, Resolve(group, layout, home.lo, part, neighbours));
    const int round = step % kStreamRounds;
    const size_t b = n * static_cast<size_t>(round) / kStreamRounds;
    const size_t e = n * static_cast<size_t>(round + 1) / kStreamRounds;
    for (size_t u = b; u < e; ++u) {
      if (part[u] >= 0) {  // a later pass takes the node out and places it again, seeing every neighbour
        for (size_t c = 0; c < nc; ++c)
          load[static_cast<size_t>(part[u]) * nc + c] -= static_cast<double>(w[u * nc + c]);
      }
      std::fill(conn.begin(), conn.end(), 0);
      for (int64_t j = ptr[u]; j < ptr[u + 1]; ++j) {
        const int64_t v = adj[static_cast<size_t>(j)];
        const int32_t q = v >= home.lo && v < home.hi
                              ? part[static_cast<size_t>(v - home.lo)]
                              : remote[static_cast<size_t>(std::lower_bound(neighbours.begin(), neighbours.end(), v) -
                                                           neighbours.begin())];
        if (q >= 0) ++conn[static_cast<size_t>(q)];
      }
      // The fullest constraint of each part with u in it; u goes where it fits and scores best.
      int32_t best = -1, least = 0;
      double best_score = -1.0, least_full = std::numeric_limits<double>::infinity();
      for (int32_t p = 0; p < parts; ++p) {
        double full = 0.0;
        for (size_t c = 0; c < nc; ++c) {
          full = std::max(full, (load[static_cast<size_t>(p) * nc + c] + static_cast<double>(w[u * nc + c])) / cap[c]);
        }
        if (full < least_full) least_full = full, least = p;
        if (full > 1.0) continue;
        const double score = static_cast<double>(conn[static_cast<size_t>(p)]) * (1.0 - full) + (1.0 - full) * 1e-9;
        if (score > best_score) best_score = score, best = p;
      }
      if (best < 0) best = least;  // nothing fits (a node heavier than the slack): the least full part
      part[u] = best;
      for (size_t c = 0; c < nc; ++c) load[static_cast<size_t>(best) * nc + c] += static_cast<double>(w[u * nc + c]);
    }
  }
  return part;
}

}  // namespace tessel::orchestrator
