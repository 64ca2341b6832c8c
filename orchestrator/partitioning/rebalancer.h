// The balance repair after a k-way partition, shared by the one-process METIS path
// (orchestrator/graph_partitioner.cc) and the distributed partitioner, where each rank repairs its home
// nodes to its own share of every constraint (partitioning/chunked_partition.cc): parts within the target
// on every rank's share are within it on the sum.
// Thread safety: a plain object over the caller's arrays.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <tuple>
#include <utility>
#include <vector>

namespace tessel::orchestrator {

// METIS's multi-constraint k-way routinely ends a few percent over its ubvec on some constraint, and
// often trades one constraint against another between two parts (part 0 heavy in nodes, part 1 in
// edges), so that no single move keeps every part within bounds. This pass repairs both: it measures
// balance by the total normalised excess
//     Phi = sum over parts p and constraints c of max(0, W[p][c] - cap[c]) / cap[c]
// and makes only moves that strictly lower Phi. It takes the most overweight (part, constraint) and
// moves nodes out of it, cheapest first by added edge cut per unit of Phi removed, preferring
// destinations the node already has neighbours in. Phi = 0 means every constraint is within the cap;
// since Phi falls with every move the pass cannot cycle, and it stops when no move lowers Phi.
//
// View: the nodes and, for node u, the part of each of its neighbours (ForEachNeighbourPart(u, f) calls
// f(part) once per neighbour; the parts of nodes the pass moves must show through it). W: the weights'
// type, `w` being [nodes * ncon] of them and `total` their sums per constraint. The caller's view may
// hold only some nodes of a graph (a rank's home range) and balance them to their own totals.
template <typename View, typename W>
class Rebalancer {
 public:
  // `target` is the imbalance each constraint is repaired to (max part / mean part).
  Rebalancer(const View& view, const W* w, int32_t ncon, const std::vector<int64_t>& total, int32_t k, double target,
             std::vector<int32_t>& part_of)
      : view_(view),
        w_(w),
        k_(k),
        ncon_(ncon),
        part_of_(part_of),
        pw_(static_cast<size_t>(k) * ncon, 0),
        cap_(static_cast<size_t>(ncon)),
        conn_(static_cast<size_t>(k), 0) {
    for (size_t i = 0; i < part_of.size(); ++i) {
      for (int32_t c = 0; c < ncon_; ++c) pw_[static_cast<size_t>(part_of[i]) * ncon_ + c] += w_[i * ncon_ + c];
    }
    for (int32_t c = 0; c < ncon_; ++c) cap_[c] = target * static_cast<double>(total[c]) / k;
  }

  // Returns the number of nodes moved.
  int32_t Run() {
    int32_t moves = 0;
    const int32_t max_rounds = 8 * k_ * ncon_ + 64;
    for (int32_t round = 0; round < max_rounds; ++round) {
      std::vector<std::tuple<double, int32_t, int32_t>> over;  // (excess, part, constraint)
      for (int32_t p = 0; p < k_; ++p) {
        for (int32_t c = 0; c < ncon_; ++c) {
          const double e = Excess(pw_[p * ncon_ + c], c);
          if (e > 0) over.emplace_back(e, p, c);
        }
      }
      if (over.empty()) break;
      std::sort(over.begin(), over.end(), std::greater<>());
      int32_t moved = 0;
      for (const auto& [excess, p, c] : over) {
        moved = Drain(p, c);
        if (moved > 0) break;
      }
      if (moved == 0) break;  // no move lowers Phi: report the imbalance as it is
      moves += moved;
    }
    return moves;
  }

 private:
  static constexpr double kMinGain = 1e-12;

  double Excess(int64_t weight, int32_t c) const {
    return std::max(0.0, static_cast<double>(weight) - cap_[c]) / cap_[c];
  }
  // How much Phi falls if u moves from p to q (positive = better balance).
  double Gain(int64_t u, int32_t p, int32_t q) const {
    double gain = 0;
    for (int32_t c = 0; c < ncon_; ++c) {
      const int64_t w = w_[u * ncon_ + c];
      if (w == 0) continue;
      const int64_t wp = pw_[p * ncon_ + c], wq = pw_[q * ncon_ + c];
      gain += Excess(wp, c) - Excess(wp - w, c) + Excess(wq, c) - Excess(wq + w, c);
    }
    return gain;
  }
  void Move(int64_t u, int32_t p, int32_t q) {
    for (int32_t c = 0; c < ncon_; ++c) {
      pw_[p * ncon_ + c] -= w_[u * ncon_ + c];
      pw_[q * ncon_ + c] += w_[u * ncon_ + c];
    }
    part_of_[u] = q;
  }

  // Moves nodes out of part p until its constraint c is within the cap or no move lowers Phi.
  int32_t Drain(int32_t p, int32_t c) {
    // Fallback destinations for nodes without a useful neighbouring part: the least loaded parts.
    std::vector<std::pair<double, int32_t>> by_load;
    for (int32_t q = 0; q < k_; ++q) {
      if (q == p) continue;
      double load = 0;
      for (int32_t d = 0; d < ncon_; ++d) load = std::max(load, pw_[q * ncon_ + d] / cap_[d]);
      by_load.emplace_back(load, q);
    }
    std::sort(by_load.begin(), by_load.end());
    if (by_load.size() > 8) by_load.resize(8);

    struct Candidate {
      double cost_per_gain;  // edge cut added per unit of Phi removed; negative when the cut shrinks
      int64_t node;
      int32_t dest;
      bool operator<(const Candidate& o) const {
        return cost_per_gain != o.cost_per_gain ? cost_per_gain < o.cost_per_gain : node < o.node;
      }
    };
    std::vector<Candidate> cands;
    const int64_t n = static_cast<int64_t>(part_of_.size());
    for (int64_t u = 0; u < n; ++u) {
      if (part_of_[u] != p || w_[u * ncon_ + c] == 0) continue;
      int32_t conn_p = 0;
      view_.ForEachNeighbourPart(u, [&](int32_t q) {
        if (q == p) {
          ++conn_p;
        } else if (conn_[q]++ == 0) {
          touched_.push_back(q);
        }
      });
      Candidate best{std::numeric_limits<double>::infinity(), u, -1};
      for (int32_t q : touched_) {
        const double gain = Gain(u, p, q);
        if (gain > kMinGain) best = std::min(best, Candidate{(conn_p - conn_[q]) / gain, u, q});
      }
      for (int32_t q : touched_) conn_[q] = 0;
      touched_.clear();
      if (best.dest < 0) {
        for (const auto& [load, q] : by_load) {
          const double gain = Gain(u, p, q);
          if (gain > kMinGain) best = std::min(best, Candidate{conn_p / gain, u, q});
        }
      }
      if (best.dest >= 0) cands.push_back(best);
    }
    std::sort(cands.begin(), cands.end());

    int32_t moved = 0;
    for (const Candidate& cand : cands) {
      if (Excess(pw_[p * ncon_ + c], c) == 0) break;
      if (Gain(cand.node, p, cand.dest) <= kMinGain) continue;  // earlier moves changed the picture
      Move(cand.node, p, cand.dest);
      ++moved;
    }
    return moved;
  }

  const View view_;  // a view is a few references: held by value
  const W* w_;
  const int32_t k_;
  const int32_t ncon_;
  std::vector<int32_t>& part_of_;
  std::vector<int64_t> pw_;    // [k * ncon] current part weights
  std::vector<double> cap_;    // [ncon] largest part weight within the target
  std::vector<int32_t> conn_;  // scratch: neighbours of the current node per part
  std::vector<int32_t> touched_;
};

}  // namespace tessel::orchestrator
