#include "orchestrator/planners/stage_search.h"

#include <algorithm>
#include <limits>

namespace tessel::orchestrator {
namespace {

int64_t Slots(int32_t stage, int32_t stages, int32_t microbatches) {
  return std::min<int64_t>(stages - stage, microbatches);
}

}  // namespace

Result<ResolvedPolicies> ResolveBlockPolicies(const jobs::JobSpec& spec) {
  ResolvedPolicies out;
  const std::vector<SpillPolicy>& layers = spec.spill.layer_policies;
  for (int32_t l = 0; l < spec.model.layers; ++l) {
    const SpillPolicy p = layers.empty() ? spec.spill.policy : layers[static_cast<size_t>(l)];
    // auto starts from offload (ChooseAutoPolicies keeps the blocks whose I/O the compute cannot hide),
    // plan from recompute (PlanPolicies).
    out.policies.push_back(p == SpillPolicy::kAuto   ? SpillPolicy::kOffload
                           : p == SpillPolicy::kPlan ? SpillPolicy::kRecompute
                                                     : p);
    out.automatic.push_back(p == SpillPolicy::kAuto);
    out.planned.push_back(p == SpillPolicy::kPlan);
  }
  return out;
}

StageBlocks CountBlocks(const std::vector<SpillPolicy>& policies, int32_t first, int32_t end) {
  StageBlocks b;
  for (int32_t l = first; l < end; ++l) {
    switch (policies[static_cast<size_t>(l)]) {
      case SpillPolicy::kKeep:
        ++b.keep;
        break;
      case SpillPolicy::kRecompute:
        ++b.recompute;
        break;
      case SpillPolicy::kOffload:
        ++b.offload;
        break;
      case SpillPolicy::kAuto:  // resolved by ResolveBlockPolicies: never a block's
      case SpillPolicy::kPlan:
        break;
    }
  }
  return b;
}

namespace {

// An activation's bytes (bf16 or f32); the statistics, gradients and optimizer state are f32.
int64_t ActivationSize(const StageCosts& k) {
  return static_cast<int64_t>(DTypeSize(workers::ActivationDType(k.precision)));
}

}  // namespace

int64_t StageActivationBytes(const StageCosts& k, int32_t s, int32_t stages, StageBlocks blocks, int32_t microbatches) {
  const int64_t f = sizeof(float), n = k.tokens, c = k.width, a = ActivationSize(k);
  const bool first = s == 0, last = s == stages - 1;
  const auto saved = [&](SpillPolicy policy) {
    return workers::BlockSavedBytesPerToken(policy, c, k.heads, k.precision);
  };
  int64_t per_microbatch =
      (int64_t{blocks.keep} * saved(SpillPolicy::kKeep) + int64_t{blocks.recompute} * saved(SpillPolicy::kRecompute) +
       int64_t{blocks.offload} * saved(SpillPolicy::kOffload)) *
          n +
      n * c * a;
  if (first) per_microbatch += n * 4;
  if (last) per_microbatch += n * 8 + n * c * a + n * 2 * f;
  // The forward's shared x2, GELU output and residual stream into kept blocks (7 C) and LayerNorm means
  // (2: workers/llm/stage_activations.cc), the recompute scratch (one kept block's tensors, which the
  // executor holds with the saved activations), and the offload pool.
  int64_t shared = n * 7 * c * a + n * 2 * f;
  if (blocks.recompute > 0) shared += n * workers::RecomputeScratchBytesPerToken(c, k.heads, k.precision);
  if (blocks.offload > 0) shared += workers::OffloadPoolBytes(n, c, k.heads, blocks.offload, k.precision);
  return Slots(s, stages, microbatches) * per_microbatch + shared;
}

int64_t StageMemoryBytes(const StageCosts& k, int32_t s, int32_t stages, StageBlocks blocks, int32_t microbatches) {
  const int64_t f = sizeof(float), n = k.tokens, c = k.width, a = ActivationSize(k);
  const bool first = s == 0, last = s == stages - 1;
  const int64_t embedding = k.padded_vocab * c;
  int64_t params = int64_t{blocks.total()} * (12 * c * c + 13 * c);
  if (first) params += embedding + k.context * c;
  if (last) params += 2 * c + (first ? 0 : embedding);
  // The temporaries (15 C a token), the logits.
  int64_t scratch = 15 * n * c * a + 2 * f;
  if (last) scratch += n * k.vocab * a + k.vocab * a + n + 16;  // the logits (their gradient in place), head bias
  if (stages > 1 && (first || last)) scratch += embedding * f;
  // Values, gradients, AdamW's two moments, and the host copy the stage's weights pass through when they
  // are initialised (and written out at the end): 20 bytes a parameter at the peak; under bf16 the
  // working copy the kernels read, 2 more.
  const int64_t per_param = 5 * f + (a < f ? a : 0);
  return per_param * params + StageActivationBytes(k, s, stages, blocks, microbatches) + scratch + k.process_bytes;
}

Result<std::vector<StageShare>> SplitStages(const StageCosts& k, const std::vector<SpillPolicy>& policies,
                                            int32_t stages, int32_t microbatches, int64_t budget,
                                            const std::vector<int32_t>& fixed, const std::string& budget_origin) {
  const auto layers = static_cast<int32_t>(policies.size());
  const auto share = [&](int32_t s, int32_t first, int32_t end) {
    StageShare sh;
    sh.first = first, sh.end = end;
    sh.blocks = CountBlocks(policies, first, end);
    sh.seconds = sh.blocks.total() * k.block_seconds + sh.blocks.recompute * k.block_forward_seconds +
                 (s == 0 ? k.embed_seconds : 0) + (s == stages - 1 ? k.head_seconds : 0);
    sh.memory_bytes = StageMemoryBytes(k, s, stages, sh.blocks, microbatches);
    return sh;
  };
  std::vector<StageShare> out;
  if (!fixed.empty()) {
    int32_t first = 0;
    for (int32_t s = 0; s < stages; ++s) {
      out.push_back(share(s, first, first + fixed[static_cast<size_t>(s)]));
      first += fixed[static_cast<size_t>(s)];
    }
  } else {
    // best[s][j]: the smallest slowest-stage time of blocks [0, j) on stages 0..s; from[s][j] its split.
    constexpr double kInf = std::numeric_limits<double>::infinity();
    const auto L = static_cast<size_t>(layers), S = static_cast<size_t>(stages);
    std::vector<std::vector<double>> best(S, std::vector<double>(L + 1, kInf));
    std::vector<std::vector<int32_t>> from(S, std::vector<int32_t>(L + 1, -1));
    const auto fits = [&](const StageShare& sh) { return budget <= 0 || sh.memory_bytes <= budget; };
    for (int32_t j = 1; j <= layers; ++j) {
      const StageShare sh = share(0, 0, j);
      if (fits(sh)) best[0][static_cast<size_t>(j)] = sh.seconds, from[0][static_cast<size_t>(j)] = 0;
    }
    for (int32_t s = 1; s < stages; ++s) {
      for (int32_t j = s + 1; j <= layers; ++j) {
        for (int32_t i = s; i < j; ++i) {
          const double before = best[static_cast<size_t>(s - 1)][static_cast<size_t>(i)];
          const StageShare sh = share(s, i, j);
          if (before == kInf || !fits(sh)) continue;
          const double t = std::max(before, sh.seconds);
          if (t < best[static_cast<size_t>(s)][static_cast<size_t>(j)]) {
            best[static_cast<size_t>(s)][static_cast<size_t>(j)] = t,
            from[static_cast<size_t>(s)][static_cast<size_t>(j)] = i;
          }
        }
      }
    }
    if (best[S - 1][L] == kInf) {
      // No split fits: report the split whose largest stage is smallest (a second dynamic program, over
      // memory), and by how much that stage overflows the budget.
      std::vector<std::vector<int64_t>> mem(S, std::vector<int64_t>(L + 1, std::numeric_limits<int64_t>::max()));
      for (int32_t j = 1; j <= layers; ++j) mem[0][static_cast<size_t>(j)] = share(0, 0, j).memory_bytes;
      for (int32_t s = 1; s < stages; ++s) {
        for (int32_t j = s + 1; j <= layers; ++j) {
          for (int32_t i = s; i < j; ++i) {
            const int64_t before = mem[static_cast<size_t>(s - 1)][static_cast<size_t>(i)];
            if (before == std::numeric_limits<int64_t>::max()) continue;
            const int64_t m = std::max(before, share(s, i, j).memory_bytes);
            mem[static_cast<size_t>(s)][static_cast<size_t>(j)] =
                std::min(mem[static_cast<size_t>(s)][static_cast<size_t>(j)], m);
          }
        }
      }
      const int64_t least = mem[S - 1][L];
      // Blocks that all recompute already keep the least they can (spill.policy = "plan" splits so).
      const bool keep_least =
          std::all_of(policies.begin(), policies.end(), [](SpillPolicy p) { return p == SpillPolicy::kRecompute; });
      return UsageError(
          StrCat(budget_origin, ": resources.memory_budget_bytes = ", budget, " cannot hold any split of ", layers,
                 " blocks into ", stages, " stages: the split with the smallest largest stage needs ", least,
                 " bytes on that stage, short by ", least - budget, " bytes (", (least - budget + (1 << 20) - 1) >> 20,
                 " MiB); raise the budget, add stages, shrink the micro-batch (train.batch_size, "
                 "or more pipeline.microbatches)",
                 keep_least ? ""
                            : ", or let blocks keep less (spill.policy = \"plan\", \"offload\" "
                              "or \"recompute\")"));
    }
    std::vector<int32_t> ends(S);
    int32_t j = layers;
    for (size_t s = S; s-- > 0;) {
      ends[s] = j;
      j = from[s][static_cast<size_t>(j)];
    }
    int32_t first = 0;
    for (int32_t s = 0; s < stages; ++s) {
      out.push_back(share(s, first, ends[static_cast<size_t>(s)]));
      first = ends[static_cast<size_t>(s)];
    }
  }
  if (budget > 0) {
    for (size_t s = 0; s < out.size(); ++s) {
      if (out[s].memory_bytes > budget) {
        return UsageError(StrCat(budget_origin, ": resources.memory_budget_bytes = ", budget, " but stage ", s,
                                 " (blocks ", out[s].first, "..", out[s].end - 1, ") needs about ", out[s].memory_bytes,
                                 " bytes: short by ", out[s].memory_bytes - budget, " bytes"));
      }
    }
  }
  return out;
}

double OffloadStallSeconds(const std::vector<bool>& offload, double forward_seconds, double backward_seconds,
                           double between_seconds, double block_bytes, const SpillBandwidth& bandwidth,
                           int32_t prefetch) {
  const auto n = static_cast<int32_t>(offload.size());
  const double write = block_bytes / std::max(bandwidth.write_bytes_per_second, 1.0);
  const double read = block_bytes / std::max(bandwidth.read_bytes_per_second, 1.0);
  double t = 0, disk = 0;  // now, and when the one disk queue is next free
  for (int32_t j = 0; j < n; ++j) {
    t += forward_seconds;
    if (offload[static_cast<size_t>(j)]) disk = std::max(disk, t) + write;
  }
  // The first reads go out as the backward of the micro-batch is entered, before it waits for its
  // gradient (the head's backward, or the later stages): from the end of the forward.
  const double forward_end = t;
  t += between_seconds;
  std::vector<double> started(static_cast<size_t>(n), t);
  double stall = 0;
  for (int32_t j = n - 1; j >= 0; --j) {
    if (offload[static_cast<size_t>(j)]) {
      // A read can go once a buffer is free: when the backward reached `prefetch` blocks above it.
      const int32_t above = j + prefetch;
      const double issue = above < n ? started[static_cast<size_t>(above)] : forward_end;
      disk = std::max(disk, issue) + read;
      if (disk > t) stall += disk - t, t = disk;
    }
    started[static_cast<size_t>(j)] = t;
    t += backward_seconds;
  }
  return stall;
}

namespace {

// From stage s's last forward of a micro-batch to its first backward of it: the head (last stage), or the
// later stages' forwards and backwards.
double BetweenSeconds(const StageCosts& k, const std::vector<StageShare>& split, int32_t s, int32_t stages) {
  double between = s == stages - 1 ? k.head_seconds : 0;
  for (int32_t later = s + 1; later < stages; ++later) between += split[static_cast<size_t>(later)].seconds;
  return between;
}

// The predicted I/O stall per micro-batch of stage `sh` under `policies` (0 without offloaded blocks).
double StageStallSeconds(const StageCosts& k, const std::vector<SpillPolicy>& policies, const StageShare& sh,
                         double between, const SpillBandwidth& bandwidth) {
  std::vector<bool> offload;
  for (int32_t l = sh.first; l < sh.end; ++l) {
    offload.push_back(policies[static_cast<size_t>(l)] == SpillPolicy::kOffload);
  }
  const int32_t offloaded = CountBlocks(policies, sh.first, sh.end).offload;
  if (offloaded == 0) return 0.0;
  const double block_bytes = static_cast<double>(k.tokens) *
                             static_cast<double>(workers::RecomputeScratchBytesPerToken(k.width, k.heads, k.precision));
  return OffloadStallSeconds(offload, k.block_forward_seconds, k.block_seconds - k.block_forward_seconds, between,
                             block_bytes, bandwidth, std::max(1, workers::OffloadBuffers(offloaded) - 1));
}

// A stage's predicted seconds per micro-batch under `policies`: its blocks, the recomputed forwards, the
// embedding and head, and the I/O stall of its offloaded blocks.
double StageSeconds(const StageCosts& k, const std::vector<SpillPolicy>& policies, const StageShare& sh, int32_t s,
                    int32_t stages, double between, const SpillBandwidth& bandwidth) {
  const StageBlocks b = CountBlocks(policies, sh.first, sh.end);
  return b.total() * k.block_seconds + b.recompute * k.block_forward_seconds + (s == 0 ? k.embed_seconds : 0) +
         (s == stages - 1 ? k.head_seconds : 0) + StageStallSeconds(k, policies, sh, between, bandwidth);
}

}  // namespace

std::vector<std::string> ChooseAutoPolicies(const StageCosts& costs, const std::vector<bool>& automatic,
                                            const SpillBandwidth& bandwidth, int32_t stages, int32_t microbatches,
                                            int64_t budget, std::vector<SpillPolicy>* policies,
                                            std::vector<StageShare>* split) {
  std::vector<std::string> notes;
  for (int32_t s = 0; s < stages; ++s) {
    StageShare& sh = (*split)[static_cast<size_t>(s)];
    const double between = BetweenSeconds(costs, *split, s, stages);
    const double compute = sh.blocks.total() * costs.block_seconds;
    const auto stall_now = [&] { return StageStallSeconds(costs, *policies, sh, between, bandwidth); };
    double stall = stall_now();
    // Keep the last automatic blocks while the disk cannot hide the stage's I/O.
    for (int32_t l = sh.end - 1; l >= sh.first && stall > 0.02 * compute; --l) {
      if (!automatic[static_cast<size_t>(l)] || (*policies)[static_cast<size_t>(l)] != SpillPolicy::kOffload) continue;
      (*policies)[static_cast<size_t>(l)] = SpillPolicy::kKeep;
      const StageBlocks blocks = CountBlocks(*policies, sh.first, sh.end);
      const int64_t memory = StageMemoryBytes(costs, s, stages, blocks, microbatches);
      if (budget > 0 && memory > budget) {
        (*policies)[static_cast<size_t>(l)] = SpillPolicy::kOffload;
        notes.push_back(StrCat("spill.policy = \"auto\": stage ", s, " would keep block ", l,
                               " to hide its I/O, but the memory budget does not allow it"));
        break;
      }
      sh.blocks = blocks;
      sh.memory_bytes = memory;
      stall = stall_now();
    }
    // Offloading pays only when the pool costs less than keeping: a small model keeps everything.
    std::vector<SpillPolicy> kept = *policies;
    for (int32_t l = sh.first; l < sh.end; ++l) {
      if (automatic[static_cast<size_t>(l)]) kept[static_cast<size_t>(l)] = SpillPolicy::kKeep;
    }
    const StageBlocks kept_blocks = CountBlocks(kept, sh.first, sh.end);
    const int64_t kept_memory = StageMemoryBytes(costs, s, stages, kept_blocks, microbatches);
    if (sh.blocks.offload > 0 && kept_memory <= sh.memory_bytes) {
      *policies = kept;
      sh.blocks = kept_blocks;
      sh.memory_bytes = kept_memory;
      stall = 0;
      notes.push_back(StrCat("spill.policy = \"auto\": stage ", s,
                             " keeps every block (its offload buffers would hold more than its activations)"));
      continue;
    }
    sh.seconds += stall;
    char line[200];
    std::snprintf(line, sizeof line,
                  "spill.policy = \"auto\": stage %d offloads %d and keeps %d of its automatic blocks (predicted I/O "
                  "stall %.1f ms per micro-batch)",
                  s, sh.blocks.offload, sh.blocks.keep, 1e3 * stall);
    notes.push_back(line);
  }
  return notes;
}

std::vector<std::string> PlanPolicies(const StageCosts& costs, const std::vector<bool>& planned,
                                      const SpillBandwidth& bandwidth, int32_t stages, int32_t microbatches,
                                      int64_t budget, std::vector<SpillPolicy>* policies,
                                      std::vector<StageShare>* split) {
  std::vector<std::string> notes;
  for (int32_t s = stages - 1; s >= 0; --s) {  // last first: a stage's "between" is the later stages' time
    StageShare& sh = (*split)[static_cast<size_t>(s)];
    const double between = BetweenSeconds(costs, *split, s, stages);
    const auto seconds = [&] { return StageSeconds(costs, *policies, sh, s, stages, between, bandwidth); };
    const auto memory = [&] {
      return StageMemoryBytes(costs, s, stages, CountBlocks(*policies, sh.first, sh.end), microbatches);
    };
    // The planned blocks of the stage, in order: the first k offload (their I/O has the most compute
    // after it to hide behind), the last j keep (their activations are needed first), the rest recompute.
    // Every (k, j) is tried; the fastest that fits wins, ties going to more kept blocks, then fewer
    // offloaded ones (less disk traffic).
    std::vector<int32_t> mine;
    for (int32_t l = sh.first; l < sh.end; ++l) {
      if (planned[static_cast<size_t>(l)]) mine.push_back(l);
    }
    const auto n = static_cast<int32_t>(mine.size());
    const auto assign = [&](int32_t k, int32_t j) {
      for (int32_t i = 0; i < n; ++i) {
        (*policies)[static_cast<size_t>(mine[static_cast<size_t>(i)])] =
            i < k ? SpillPolicy::kOffload : (i >= n - j ? SpillPolicy::kKeep : SpillPolicy::kRecompute);
      }
    };
    int32_t best_k = 0, best_j = 0;
    double best = std::numeric_limits<double>::infinity();
    for (int32_t j = n; j >= 0; --j) {
      for (int32_t k = 0; k + j <= n; ++k) {
        assign(k, j);
        if (budget > 0 && memory() > budget) continue;
        const double t = seconds();
        if (t < best * (1 - 1e-9)) best = t, best_k = k, best_j = j;
      }
    }
    // Nothing fits: the leanest (every planned block recomputed); SplitStages already refused a split
    // that does not fit that way.
    assign(best == std::numeric_limits<double>::infinity() ? 0 : best_k,
           best == std::numeric_limits<double>::infinity() ? 0 : best_j);
    sh.blocks = CountBlocks(*policies, sh.first, sh.end);
    sh.memory_bytes = memory();
    sh.seconds = seconds();
    char line[240];
    std::snprintf(line, sizeof line,
                  "spill.policy = \"plan\": stage %d keeps %d, offloads %d and recomputes %d blocks: %.1f ms per "
                  "micro-batch, %.1f MiB",
                  s, sh.blocks.keep, sh.blocks.offload, sh.blocks.recompute, 1e3 * sh.seconds,
                  static_cast<double>(sh.memory_bytes) / (1 << 20));
    notes.insert(notes.begin(), line);
  }
  return notes;
}

}  // namespace tessel::orchestrator
