#include "orchestrator/planners/stage_planner.h"

#include <tessel/ops/llm.h>
#include <tessel/ops/nn.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <ostream>

#include "core/cuda_device.h"
#include "core/process_memory.h"
#include "core/thread_pool.h"
#include "storage/llmc.h"
#include "storage/spill_store.h"
#include "workers/llm/token_data.h"
#include "workers/plugin_host/kernel_registry.h"
#include "workers/rgnn/kernel_set.h"

namespace tessel::orchestrator {
namespace {

using workers::GptConfig;
using workers::LlmTrainSettings;

GptConfig ConfigFor(const jobs::JobSpec& spec) {
  GptConfig c;
  c.layers = spec.model.layers;
  c.width = spec.model.hidden;
  c.heads = spec.model.heads;
  c.context = spec.model.context;
  c.vocab = spec.model.vocab_size;
  c.padded_vocab = (c.vocab + 127) / 128 * 128;
  return c;
}

LlmTrainSettings TrainFor(const jobs::JobSpec& spec) {
  const jobs::TrainSection& t = spec.train;
  LlmTrainSettings s;
  s.steps = t.steps;
  s.microbatches = spec.pipeline.microbatches;
  s.data_parallel = spec.pipeline.data_parallel;
  s.microbatch = t.microbatch_size > 0 ? t.microbatch_size : t.batch_size / (s.microbatches * s.data_parallel);
  s.seq_len = t.seq_len > 0 ? t.seq_len : spec.model.context;
  s.lr = t.lr;
  s.beta1 = t.beta1;
  s.beta2 = t.beta2;
  s.eps = t.eps;
  s.weight_decay = t.weight_decay;
  s.grad_clip = t.grad_clip;
  s.warmup_steps = t.warmup_steps;
  s.final_lr_fraction = t.final_lr_fraction;
  s.val_every = t.val_every;
  s.val_batches = t.val_batches;
  return s;
}

workers::LlmDataSettings DataFor(const jobs::JobSpec& spec) {
  const jobs::DataSection& d = spec.data;
  workers::LlmDataSettings s;
  s.source = d.format == jobs::DataFormat::kLlmc   ? workers::TokenSource::kLlmc
             : d.format == jobs::DataFormat::kText ? workers::TokenSource::kText
                                                   : workers::TokenSource::kGenerated;
  s.text = d.text;
  s.train_tokens = d.train_tokens;
  s.val_tokens = d.val_tokens;
  s.val_fraction = d.val_fraction;
  s.generated_bytes = d.generated_bytes;
  s.generated_seed = d.synthetic.seed;
  s.shuffled = d.order == jobs::BatchOrder::kShuffled;
  s.shuffle_seed = spec.job.seed;
  return s;
}

// Fills host memory with small pseudo-random values (the calibration's inputs).
void Fill(Tensor& t, uint64_t seed) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ULL + 1;
  const auto next = [&x] {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    return static_cast<double>(x >> 11) / static_cast<double>(1ULL << 53);
  };
  if (t.dtype() == DType::kF32) {
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>(0.1 * (next() - 0.5));
  }
}

// Times the kernels of one block, the head and the embedding at the job's micro-batch shape on this
// rank, with the job's plugins and threads: the best of `reps` runs of each.
Result<StageCosts> Calibrate(const jobs::JobSpec& spec, const GptConfig& m, const LlmTrainSettings& t) {
  workers::KernelRegistry registry;
  TESSEL_RETURN_IF_ERROR(registry.LoadDefaults(spec.plugins.paths, spec.plugins.search_dirs));
  ThreadPool pool(spec.resources.threads_per_worker);
  workers::ExecutorContext context;
  context.pool = &pool;
  context.kernels = &registry;
  workers::KernelSet k(registry, context);
  const int64_t b = t.microbatch, s = t.seq_len, c = m.width, h = m.heads, v = m.vocab, n = b * s;
  std::vector<Tensor> keep;
  const auto make = [&](DType dtype, std::vector<int64_t> shape) -> Result<Tensor*> {
    TESSEL_ASSIGN_OR_RETURN(Tensor x, Tensor::Zeros(dtype, std::move(shape)));
    Fill(x, keep.size() + 1);
    keep.push_back(std::move(x));
    return &keep.back();
  };
  keep.reserve(64);
  TESSEL_ASSIGN_OR_RETURN(Tensor * x, make(DType::kF32, {n, c}));
  TESSEL_ASSIGN_OR_RETURN(Tensor * y, make(DType::kF32, {n, c}));
  TESSEL_ASSIGN_OR_RETURN(Tensor * dy, make(DType::kF32, {n, c}));
  TESSEL_ASSIGN_OR_RETURN(Tensor * mean, make(DType::kF32, {n}));
  TESSEL_ASSIGN_OR_RETURN(Tensor * rstd, make(DType::kF32, {n}));
  TESSEL_ASSIGN_OR_RETURN(Tensor * lw, make(DType::kF32, {c}));
  TESSEL_ASSIGN_OR_RETURN(Tensor * lb, make(DType::kF32, {c}));
  TESSEL_ASSIGN_OR_RETURN(Tensor * dlw, make(DType::kF32, {c}));
  TESSEL_ASSIGN_OR_RETURN(Tensor * dlb, make(DType::kF32, {c}));
  TESSEL_ASSIGN_OR_RETURN(Tensor * qkv, make(DType::kF32, {b, s, 3 * c}));
  TESSEL_ASSIGN_OR_RETURN(Tensor * dqkv, make(DType::kF32, {b, s, 3 * c}));
  TESSEL_ASSIGN_OR_RETURN(Tensor * att, make(DType::kF32, {b, s, c}));
  TESSEL_ASSIGN_OR_RETURN(Tensor * datt, make(DType::kF32, {b, s, c}));
  TESSEL_ASSIGN_OR_RETURN(Tensor * lse, make(DType::kF32, {b, h, s}));
  TESSEL_ASSIGN_OR_RETURN(Tensor * wide, make(DType::kF32, {n, 4 * c}));
  TESSEL_ASSIGN_OR_RETURN(Tensor * wide2, make(DType::kF32, {n, 4 * c}));
  TESSEL_ASSIGN_OR_RETURN(Tensor * dwide, make(DType::kF32, {n, 4 * c}));
  struct Lin {
    Tensor *w, *b, *dw, *db;
  };
  const auto linear = [&](int64_t out, int64_t in) -> Result<Lin> {
    Lin l;
    TESSEL_ASSIGN_OR_RETURN(l.w, make(DType::kF32, {out, in}));
    TESSEL_ASSIGN_OR_RETURN(l.b, make(DType::kF32, {out}));
    TESSEL_ASSIGN_OR_RETURN(l.dw, make(DType::kF32, {out, in}));
    TESSEL_ASSIGN_OR_RETURN(l.db, make(DType::kF32, {out}));
    return l;
  };
  TESSEL_ASSIGN_OR_RETURN(Lin lqkv, linear(3 * c, c));
  TESSEL_ASSIGN_OR_RETURN(Lin lproj, linear(c, c));
  TESSEL_ASSIGN_OR_RETURN(Lin lfc, linear(4 * c, c));
  TESSEL_ASSIGN_OR_RETURN(Lin lfcproj, linear(c, 4 * c));
  // The attention's lse must be a real log-sum-exp for the backward to see realistic values.
  const tessel_layernorm_params ln{sizeof(tessel_layernorm_params), 1e-5};
  const tessel_attention_params at{sizeof(tessel_attention_params), m.heads};
  Tensor qkv2 = Tensor::Borrow(qkv->raw(), DType::kF32, {n, 3 * c});
  Tensor dqkv2 = Tensor::Borrow(dqkv->raw(), DType::kF32, {n, 3 * c});
  Tensor att2 = Tensor::Borrow(att->raw(), DType::kF32, {n, c});
  Tensor datt2 = Tensor::Borrow(datt->raw(), DType::kF32, {n, c});
  Tensor fx = Tensor::Borrow(x->raw(), DType::kF32, {n * c}), fy = Tensor::Borrow(y->raw(), DType::kF32, {n * c});
  const auto block_forward = [&]() -> Status {
    TESSEL_RETURN_IF_ERROR(k.Call(tessel_op_llm_layernorm_fwd, {x, lw, lb}, {y, mean, rstd}, ln));
    TESSEL_RETURN_IF_ERROR(k.Call(tessel_op_nn_linear_fwd, {y, lqkv.w, lqkv.b}, {&qkv2}));
    TESSEL_RETURN_IF_ERROR(k.Call(tessel_op_llm_attention_fwd, {qkv}, {att, lse}, at));
    TESSEL_RETURN_IF_ERROR(k.Call(tessel_op_nn_linear_fwd, {&att2, lproj.w, lproj.b}, {y}));
    TESSEL_RETURN_IF_ERROR(k.Call(tessel_op_nn_add, {&fx, &fy}, {&fy}));
    TESSEL_RETURN_IF_ERROR(k.Call(tessel_op_llm_layernorm_fwd, {x, lw, lb}, {y, mean, rstd}, ln));
    TESSEL_RETURN_IF_ERROR(k.Call(tessel_op_nn_linear_fwd, {y, lfc.w, lfc.b}, {wide}));
    TESSEL_RETURN_IF_ERROR(k.Call(tessel_op_nn_gelu_tanh_fwd, {wide}, {wide2}));
    TESSEL_RETURN_IF_ERROR(k.Call(tessel_op_nn_linear_fwd, {wide2, lfcproj.w, lfcproj.b}, {y}));
    return k.Call(tessel_op_nn_add, {&fx, &fy}, {&fy});
  };
  const auto block = [&]() -> Status {
    TESSEL_RETURN_IF_ERROR(block_forward());
    // The backward regenerates the GELU's output it does not keep (workers/llm/gpt_stage.cc).
    TESSEL_RETURN_IF_ERROR(k.Call(tessel_op_nn_gelu_tanh_fwd, {wide}, {wide2}));
    TESSEL_RETURN_IF_ERROR(k.Call(tessel_op_nn_linear_bwd, {dy, wide2, lfcproj.w}, {dwide, lfcproj.dw, lfcproj.db}));
    TESSEL_RETURN_IF_ERROR(k.Call(tessel_op_nn_gelu_tanh_bwd, {dwide, wide}, {wide2}));
    TESSEL_RETURN_IF_ERROR(k.Call(tessel_op_nn_linear_bwd, {wide2, y, lfc.w}, {x, lfc.dw, lfc.db}));
    TESSEL_RETURN_IF_ERROR(k.Call(tessel_op_llm_layernorm_bwd, {x, y, lw, mean, rstd}, {dy, dlw, dlb}));
    TESSEL_RETURN_IF_ERROR(k.Call(tessel_op_nn_linear_bwd, {dy, &att2, lproj.w}, {&datt2, lproj.dw, lproj.db}));
    TESSEL_RETURN_IF_ERROR(k.Call(tessel_op_llm_attention_bwd, {datt, qkv, att, lse}, {dqkv}, at));
    TESSEL_RETURN_IF_ERROR(k.Call(tessel_op_nn_linear_bwd, {&dqkv2, y, lqkv.w}, {x, lqkv.dw, lqkv.db}));
    return k.Call(tessel_op_llm_layernorm_bwd, {x, y, lw, mean, rstd}, {dy, dlw, dlb});
  };
  // The head: final LayerNorm, logits against the tied embedding, loss; and back. Timed on at most 1024 of
  // the micro-batch's rows and scaled to all of them (its cost is linear in the rows; a GPT-2 vocabulary
  // would otherwise cost gigabytes of logits and seconds of calibration).
  const int64_t hn = std::min<int64_t>(n, 1024);
  TESSEL_ASSIGN_OR_RETURN(Tensor * wte, make(DType::kF32, {v, c}));
  TESSEL_ASSIGN_OR_RETURN(Tensor * dwte, make(DType::kF32, {v, c}));
  TESSEL_ASSIGN_OR_RETURN(Tensor * logits, make(DType::kF32, {hn, v}));
  TESSEL_ASSIGN_OR_RETURN(Tensor * dlogits, make(DType::kF32, {hn, v}));
  TESSEL_ASSIGN_OR_RETURN(Tensor * targets, make(DType::kI64, {hn}));
  TESSEL_ASSIGN_OR_RETURN(Tensor * mask, make(DType::kU8, {hn}));
  TESSEL_ASSIGN_OR_RETURN(Tensor * loss, make(DType::kF64, {1}));
  TESSEL_ASSIGN_OR_RETURN(Tensor * correct, make(DType::kI64, {1}));
  for (int64_t i = 0; i < hn; ++i) targets->data<int64_t>()[i] = i % v, mask->data<uint8_t>()[i] = 1;
  Tensor hx = Tensor::Borrow(x->raw(), DType::kF32, {hn, c}), hy = Tensor::Borrow(y->raw(), DType::kF32, {hn, c});
  Tensor hdy = Tensor::Borrow(dy->raw(), DType::kF32, {hn, c});
  Tensor hmean = Tensor::Borrow(mean->raw(), DType::kF32, {hn}), hrstd = Tensor::Borrow(rstd->raw(), DType::kF32, {hn});
  const auto head = [&]() -> Status {
    TESSEL_RETURN_IF_ERROR(k.Call(tessel_op_llm_layernorm_fwd, {&hx, lw, lb}, {&hy, &hmean, &hrstd}, ln));
    TESSEL_RETURN_IF_ERROR(k.Call(tessel_op_nn_gemm, {&hy, wte}, {logits}, tessel_gemm_params{sizeof(tessel_gemm_params), 0, 1, 1.0, 0.0}));
    TESSEL_RETURN_IF_ERROR(k.Call(tessel_op_nn_softmax_xent, {logits, targets, mask}, {loss, correct, dlogits},
                                  tessel_softmax_xent_params{sizeof(tessel_softmax_xent_params), 1.0 / n}));
    TESSEL_RETURN_IF_ERROR(k.Call(tessel_op_nn_gemm, {dlogits, wte}, {&hdy}, tessel_gemm_params{sizeof(tessel_gemm_params), 0, 0, 1.0, 0.0}));
    TESSEL_RETURN_IF_ERROR(k.Call(tessel_op_nn_gemm, {dlogits, &hy}, {dwte}, tessel_gemm_params{sizeof(tessel_gemm_params), 1, 0, 1.0, 1.0}));
    return k.Call(tessel_op_llm_layernorm_bwd, {&hdy, &hx, lw, &hmean, &hrstd}, {&hy, dlw, dlb});
  };
  TESSEL_ASSIGN_OR_RETURN(Tensor * wpe, make(DType::kF32, {s, c}));
  TESSEL_ASSIGN_OR_RETURN(Tensor * dwpe, make(DType::kF32, {s, c}));
  TESSEL_ASSIGN_OR_RETURN(Tensor * tokens, make(DType::kI32, {b, s}));
  for (int64_t i = 0; i < n; ++i) tokens->data<int32_t>()[i] = static_cast<int32_t>(i % v);
  Tensor x3 = Tensor::Borrow(x->raw(), DType::kF32, {b, s, c}), dy3 = Tensor::Borrow(dy->raw(), DType::kF32, {b, s, c});
  const auto embed = [&]() -> Status {
    TESSEL_RETURN_IF_ERROR(k.Call(tessel_op_llm_encoder_fwd, {wte, wpe, tokens}, {&x3}));
    return k.Call(tessel_op_llm_encoder_bwd, {&dy3, tokens}, {dwte, dwpe});
  };
  TESSEL_RETURN_IF_ERROR(k.Call(tessel_op_llm_attention_fwd, {qkv}, {att, lse}, at));
  const auto best_of = [](int reps, const auto& fn) -> Result<double> {
    double best = std::numeric_limits<double>::infinity();
    for (int r = 0; r < reps; ++r) {
      const auto start = std::chrono::steady_clock::now();
      TESSEL_RETURN_IF_ERROR(fn());
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    return best;
  };
  TESSEL_RETURN_IF_ERROR(block());  // first touches
  StageCosts costs;
  TESSEL_ASSIGN_OR_RETURN(costs.block_seconds, best_of(3, block));
  TESSEL_ASSIGN_OR_RETURN(costs.block_forward_seconds, best_of(3, block_forward));
  TESSEL_ASSIGN_OR_RETURN(costs.head_seconds, best_of(3, head));
  costs.head_seconds *= static_cast<double>(n) / static_cast<double>(hn);
  TESSEL_ASSIGN_OR_RETURN(costs.embed_seconds, best_of(3, embed));
  costs.tokens = n, costs.width = c, costs.heads = h, costs.vocab = v, costs.padded_vocab = m.padded_vocab;
  costs.context = m.context;
  // What a worker holds besides its tensors, measured in this process, which is like a worker's: the same
  // plugins and the libraries they link, the BLAS buffers the kernels above touched, the token data. Less
  // the calibration's own tensors, still alive here.
  int64_t calibration_bytes = 0;
  for (const Tensor& t : keep) calibration_bytes += static_cast<int64_t>(t.nbytes());
  costs.process_bytes = std::max<int64_t>(0, ResidentBytes() - calibration_bytes);
  return costs;
}

int64_t Slots(int32_t stage, int32_t stages, int32_t microbatches) {
  return std::min<int64_t>(stages - stage, microbatches);
}

}  // namespace

Result<ResolvedPolicies> ResolveBlockPolicies(const jobs::JobSpec& spec) {
  using workers::BlockPolicy;
  ResolvedPolicies out;
  const std::vector<jobs::SpillPolicy>& layers = spec.spill.layer_policies;
  for (int32_t l = 0; l < spec.model.layers; ++l) {
    const jobs::SpillPolicy p = layers.empty() ? spec.spill.policy : layers[static_cast<size_t>(l)];
    BlockPolicy b = BlockPolicy::kKeep;
    switch (p) {
      case jobs::SpillPolicy::kKeep: b = BlockPolicy::kKeep; break;
      case jobs::SpillPolicy::kRecompute:
      case jobs::SpillPolicy::kPlan: b = BlockPolicy::kRecompute; break;
      // auto starts from offload; ChooseAutoPolicies keeps the blocks whose I/O the compute cannot hide.
      case jobs::SpillPolicy::kAuto:
      case jobs::SpillPolicy::kOffload: b = BlockPolicy::kOffload; break;
    }
    out.policies.push_back(b);
    out.automatic.push_back(p == jobs::SpillPolicy::kAuto);
    out.planned.push_back(p == jobs::SpillPolicy::kPlan);
  }
  return out;
}

StageBlocks CountBlocks(const std::vector<workers::BlockPolicy>& policies, int32_t first, int32_t end) {
  StageBlocks b;
  for (int32_t l = first; l < end; ++l) {
    switch (policies[static_cast<size_t>(l)]) {
      case workers::BlockPolicy::kKeep: ++b.keep; break;
      case workers::BlockPolicy::kRecompute: ++b.recompute; break;
      case workers::BlockPolicy::kOffload: ++b.offload; break;
    }
  }
  return b;
}

int64_t StageMemoryBytes(const StageCosts& k, int32_t s, int32_t stages, StageBlocks blocks, int32_t microbatches) {
  using workers::BlockPolicy;
  const int64_t f = sizeof(float), n = k.tokens, c = k.width;
  const bool first = s == 0, last = s == stages - 1;
  const int64_t embedding = k.padded_vocab * c;
  int64_t params = int64_t{blocks.total()} * (12 * c * c + 13 * c);
  if (first) params += embedding + k.context * c;
  if (last) params += 2 * c + (first ? 0 : embedding);
  const int64_t kept = workers::BlockSavedFloatsPerToken(BlockPolicy::kKeep, c, k.heads);
  const int64_t recomputed = workers::BlockSavedFloatsPerToken(BlockPolicy::kRecompute, c, k.heads);
  const int64_t offloaded = workers::BlockSavedFloatsPerToken(BlockPolicy::kOffload, c, k.heads);
  int64_t per_microbatch =
      (int64_t{blocks.keep} * kept + int64_t{blocks.recompute} * recomputed + int64_t{blocks.offload} * offloaded) * n *
          f +
      n * c * f;
  if (first) per_microbatch += n * 4;
  if (last) per_microbatch += n * 8 + n * (c + 2) * f;
  // The temporaries (15 C a token), and the forward's shared x2, LayerNorm means, GELU output and
  // residual stream into kept blocks (7 C + 2: workers/llm/gpt_stage.cc).
  int64_t scratch = 15 * n * c * f + 2 * f + n * (7 * c + 2) * f;
  if (blocks.recompute > 0) scratch += n * workers::RecomputeScratchFloatsPerToken(c, k.heads) * f;
  if (blocks.offload > 0) scratch += n * workers::OffloadPoolFloatsPerToken(c, k.heads, blocks.offload) * f;
  if (last) scratch += 2 * n * k.vocab * f + n + 16;
  if (stages > 1 && (first || last)) scratch += embedding * f;
  // Values, gradients, AdamW's two moments, and the host copy the stage's weights pass through when they
  // are initialised (and written out at the end): 20 bytes a parameter at the peak.
  return 5 * f * params + Slots(s, stages, microbatches) * per_microbatch + scratch + k.process_bytes;
}

Result<std::vector<StageShare>> SplitStages(const StageCosts& k, const std::vector<workers::BlockPolicy>& policies,
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
            best[static_cast<size_t>(s)][static_cast<size_t>(j)] = t, from[static_cast<size_t>(s)][static_cast<size_t>(j)] = i;
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
            mem[static_cast<size_t>(s)][static_cast<size_t>(j)] = std::min(mem[static_cast<size_t>(s)][static_cast<size_t>(j)], m);
          }
        }
      }
      const int64_t least = mem[S - 1][L];
      // Blocks that all recompute already keep the least they can (spill.policy = "plan" splits so).
      const bool keep_least = std::all_of(policies.begin(), policies.end(),
                                          [](workers::BlockPolicy p) { return p == workers::BlockPolicy::kRecompute; });
      return UsageError(StrCat(budget_origin, ": resources.memory_budget_bytes = ", budget,
                               " cannot hold any split of ", layers, " blocks into ", stages,
                               " stages: the split with the smallest largest stage needs ", least,
                               " bytes on that stage, short by ", least - budget, " bytes (",
                               (least - budget + (1 << 20) - 1) >> 20,
                               " MiB); raise the budget, add stages, shrink the micro-batch (train.batch_size, "
                               "or more pipeline.microbatches)",
                               keep_least ? "" : ", or let blocks keep less (spill.policy = \"plan\", \"offload\" "
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
                                 " (blocks ", out[s].first, "..", out[s].end - 1, ") needs about ",
                                 out[s].memory_bytes, " bytes: short by ", out[s].memory_bytes - budget, " bytes"));
      }
    }
  }
  return out;
}

Result<SpillBandwidth> MeasureSpillBandwidth(const jobs::JobSpec& spec, int64_t slot_bytes) {
  constexpr int64_t kAlign = 4096, kSlots = 4;
  slot_bytes = std::clamp<int64_t>(slot_bytes, int64_t{4} << 20, int64_t{64} << 20) / kAlign * kAlign;
  TESSEL_ASSIGN_OR_RETURN(std::unique_ptr<storage::SpillStore> store,
                          storage::SpillStore::Open({spec.spill.dir, StrCat(spec.job.name, "-bandwidth-probe"),
                                                     spec.spill.checksum, 0}));
  Tensor buffer = Tensor::Empty(DType::kU8, {kSlots * slot_bytes}).value();
  for (int64_t i = 0; i < buffer.numel(); ++i) buffer.data<uint8_t>()[i] = static_cast<uint8_t>(i * 131 + (i >> 12));
  using Clock = std::chrono::steady_clock;
  const auto run = [&](bool write) -> Result<double> {
    const auto start = Clock::now();
    std::vector<storage::SpillStore::Ticket> tickets;
    for (int64_t k = 0; k < kSlots; ++k) {
      uint8_t* at = buffer.data<uint8_t>() + k * slot_bytes;
      tickets.push_back(write ? store->Write(k, at, slot_bytes) : store->Read(k, at, slot_bytes));
    }
    if (write) tickets.push_back(store->Sync());
    for (storage::SpillStore::Ticket t : tickets) TESSEL_RETURN_IF_ERROR(store->Wait(t));
    return std::chrono::duration<double>(Clock::now() - start).count();
  };
  TESSEL_ASSIGN_OR_RETURN(const double write_seconds, run(true));
  // Reads from the disk, not from the page cache.
  if (const int fd = ::open(store->path().c_str(), O_RDONLY | O_CLOEXEC); fd >= 0) {
    (void)::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  }
  TESSEL_ASSIGN_OR_RETURN(const double read_seconds, run(false));
  const double bytes = static_cast<double>(kSlots * slot_bytes);
  return SpillBandwidth{bytes / std::max(write_seconds, 1e-9), bytes / std::max(read_seconds, 1e-9)};
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
double StageStallSeconds(const StageCosts& k, const std::vector<workers::BlockPolicy>& policies, const StageShare& sh,
                         double between, const SpillBandwidth& bandwidth) {
  std::vector<bool> offload;
  for (int32_t l = sh.first; l < sh.end; ++l) {
    offload.push_back(policies[static_cast<size_t>(l)] == workers::BlockPolicy::kOffload);
  }
  const int32_t offloaded = CountBlocks(policies, sh.first, sh.end).offload;
  if (offloaded == 0) return 0.0;
  const double block_bytes = static_cast<double>(k.tokens) *
                             static_cast<double>(workers::RecomputeScratchFloatsPerToken(k.width, k.heads)) * sizeof(float);
  return OffloadStallSeconds(offload, k.block_forward_seconds, k.block_seconds - k.block_forward_seconds, between,
                             block_bytes, bandwidth, std::max(1, workers::OffloadBuffers(offloaded) - 1));
}

// A stage's predicted seconds per micro-batch under `policies`: its blocks, the recomputed forwards, the
// embedding and head, and the I/O stall of its offloaded blocks.
double StageSeconds(const StageCosts& k, const std::vector<workers::BlockPolicy>& policies, const StageShare& sh,
                    int32_t s, int32_t stages, double between, const SpillBandwidth& bandwidth) {
  const StageBlocks b = CountBlocks(policies, sh.first, sh.end);
  return b.total() * k.block_seconds + b.recompute * k.block_forward_seconds + (s == 0 ? k.embed_seconds : 0) +
         (s == stages - 1 ? k.head_seconds : 0) + StageStallSeconds(k, policies, sh, between, bandwidth);
}

}  // namespace

std::vector<std::string> ChooseAutoPolicies(const StageCosts& costs, const std::vector<bool>& automatic,
                                            const SpillBandwidth& bandwidth, int32_t stages, int32_t microbatches,
                                            int64_t budget, std::vector<workers::BlockPolicy>* policies,
                                            std::vector<StageShare>* split) {
  using workers::BlockPolicy;
  std::vector<std::string> notes;
  for (int32_t s = 0; s < stages; ++s) {
    StageShare& sh = (*split)[static_cast<size_t>(s)];
    const double between = BetweenSeconds(costs, *split, s, stages);
    const double compute = sh.blocks.total() * costs.block_seconds;
    const auto stall_now = [&] { return StageStallSeconds(costs, *policies, sh, between, bandwidth); };
    double stall = stall_now();
    // Keep the last automatic blocks while the disk cannot hide the stage's I/O.
    for (int32_t l = sh.end - 1; l >= sh.first && stall > 0.02 * compute; --l) {
      if (!automatic[static_cast<size_t>(l)] || (*policies)[static_cast<size_t>(l)] != BlockPolicy::kOffload) continue;
      (*policies)[static_cast<size_t>(l)] = BlockPolicy::kKeep;
      const StageBlocks blocks = CountBlocks(*policies, sh.first, sh.end);
      const int64_t memory = StageMemoryBytes(costs, s, stages, blocks, microbatches);
      if (budget > 0 && memory > budget) {
        (*policies)[static_cast<size_t>(l)] = BlockPolicy::kOffload;
        notes.push_back(StrCat("spill.policy = \"auto\": stage ", s, " would keep block ", l,
                               " to hide its I/O, but the memory budget does not allow it"));
        break;
      }
      sh.blocks = blocks;
      sh.memory_bytes = memory;
      stall = stall_now();
    }
    // Offloading pays only when the pool costs less than keeping: a small model keeps everything.
    std::vector<workers::BlockPolicy> kept = *policies;
    for (int32_t l = sh.first; l < sh.end; ++l) {
      if (automatic[static_cast<size_t>(l)]) kept[static_cast<size_t>(l)] = BlockPolicy::kKeep;
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
                                      int64_t budget, std::vector<workers::BlockPolicy>* policies,
                                      std::vector<StageShare>* split) {
  using workers::BlockPolicy;
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
            i < k ? BlockPolicy::kOffload : (i >= n - j ? BlockPolicy::kKeep : BlockPolicy::kRecompute);
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

Result<Plan> StagePlanner::MakePlan(const jobs::JobSpec& spec, int32_t num_workers, const Logger& log) {
  GptConfig model = ConfigFor(spec);
  const LlmTrainSettings train = TrainFor(spec);
  const workers::LlmDataSettings data = DataFor(spec);
  const int32_t stages = spec.pipeline.stages, replicas = spec.pipeline.data_parallel;
  if (num_workers != stages * replicas) {
    return UsageError(StrCat(jobs::KeyOrigin(spec, "pipeline.stages"), ": ", stages, " stages x ", replicas,
                             " replicas need ", stages * replicas, " workers, but the job runs ", num_workers));
  }
  // Before the data and the calibration (seconds): a policy this build cannot run is refused at once.
  Plan plan;
  TESSEL_ASSIGN_OR_RETURN(ResolvedPolicies resolved, ResolveBlockPolicies(spec));
  std::vector<workers::BlockPolicy>& policies = resolved.policies;
  if (!spec.model.init_from.empty()) {
    TESSEL_ASSIGN_OR_RETURN(storage::LlmcCheckpoint ck, storage::ReadLlmcCheckpoint(spec.model.init_from));
    const storage::LlmcConfig& h = ck.config;
    model.padded_vocab = h.padded_vocab_size;
    if (h.num_layers != model.layers || h.channels != model.width || h.num_heads != model.heads ||
        h.max_seq_len != model.context || h.vocab_size != model.vocab) {
      return UsageError(StrCat(jobs::KeyOrigin(spec, "model.init_from"), ": ", spec.model.init_from, " holds a GPT-2 of ",
                               h.num_layers, " layers, width ", h.channels, ", ", h.num_heads, " heads, context ",
                               h.max_seq_len, ", vocabulary ", h.vocab_size, "; the job asks for ", model.layers,
                               ", ", model.width, ", ", model.heads, ", ", model.context, ", ", model.vocab,
                               " (set model.* to match)"));
    }
  }
  // The data, checked here so that bad input stops the job before any rank starts (exit 3).
  TESSEL_ASSIGN_OR_RETURN(workers::TokenSplits splits,
                          workers::LoadTokenSplits(data, model.vocab, train.global_batch(), train.seq_len));
  log.Info(StrCat("tokens: ", splits.train.size(), " to train on, ", splits.val.size(), " to validate on (",
                  splits.train_name, ")"));
  TESSEL_ASSIGN_OR_RETURN(StageCosts costs, Calibrate(spec, model, train));
  // A GPU worker's tensors are in device memory, where the process's own host memory does not count.
  const bool on_cpu = spec.job.device == jobs::DeviceChoice::kCpu ||
                      (spec.job.device == jobs::DeviceChoice::kAuto && !ProbeCuda().usable());
  if (!on_cpu) costs.process_bytes = 0;
  TESSEL_ASSIGN_OR_RETURN(std::vector<StageShare> split,
                          SplitStages(costs, policies, stages, train.microbatches,
                                      spec.resources.memory_budget_bytes, spec.pipeline.layers,
                                      jobs::KeyOrigin(spec, "resources.memory_budget_bytes")));
  Record spill;
  const bool plans = std::find(resolved.planned.begin(), resolved.planned.end(), true) != resolved.planned.end();
  if (plans || std::find(policies.begin(), policies.end(), workers::BlockPolicy::kOffload) != policies.end()) {
    // The spill directory is checked (exit 6) and its bandwidth measured before any rank starts.
    const int64_t block_bytes = costs.tokens * workers::RecomputeScratchFloatsPerToken(costs.width, costs.heads) *
                                static_cast<int64_t>(sizeof(float));
    TESSEL_ASSIGN_OR_RETURN(const SpillBandwidth bandwidth, MeasureSpillBandwidth(spec, block_bytes));
    char line[200];
    std::snprintf(line, sizeof line, "spill: %s writes %.2f GB/s (to the disk) and reads %.2f GB/s; %.1f MB a block",
                  spec.spill.dir.c_str(), 1e-9 * bandwidth.write_bytes_per_second, 1e-9 * bandwidth.read_bytes_per_second,
                  1e-6 * static_cast<double>(block_bytes));
    plan.notes.push_back(line);
    Set(spill, "write_bytes_per_second", bandwidth.write_bytes_per_second);
    Set(spill, "read_bytes_per_second", bandwidth.read_bytes_per_second);
    if (std::find(resolved.automatic.begin(), resolved.automatic.end(), true) != resolved.automatic.end()) {
      for (std::string& note : ChooseAutoPolicies(costs, resolved.automatic, bandwidth, stages, train.microbatches,
                                                  spec.resources.memory_budget_bytes, &policies, &split)) {
        plan.notes.push_back(std::move(note));
      }
    }
    if (plans) {
      for (std::string& note : PlanPolicies(costs, resolved.planned, bandwidth, stages, train.microbatches,
                                            spec.resources.memory_budget_bytes, &policies, &split)) {
        plan.notes.push_back(std::move(note));
      }
    }
  }
  double slowest = 0;
  for (const StageShare& s : split) slowest = std::max(slowest, s.seconds);
  const double step_seconds = (train.microbatches + stages - 1) * slowest;

  plan.step_unit = "step";
  plan.num_steps = train.steps;
  std::vector<double> blocks, recomputed, offloaded, predicted;
  for (int32_t r = 0; r < replicas; ++r) {
    for (int32_t s = 0; s < stages; ++s) {
      auto a = std::make_unique<workers::LlmStageAssignment>();
      a->model = model;
      a->train = train;
      a->data = data;
      a->place = workers::StagePlacement{s, stages, split[static_cast<size_t>(s)].first, split[static_cast<size_t>(s)].end, r};
      a->init_from = spec.model.init_from;
      const StageShare& share = split[static_cast<size_t>(s)];
      a->block_policies.assign(policies.begin() + share.first, policies.begin() + share.end);
      a->spill = workers::LlmSpillSettings{spec.spill.dir, spec.job.name, spec.spill.checksum, spec.spill.budget_bytes};
      WorkerPlan w;
      w.payload = std::move(a);
      w.predicted_memory_bytes = split[static_cast<size_t>(s)].memory_bytes;
      w.predicted_step_seconds = step_seconds;
      Set(w.details, "stage", int64_t{s});
      Set(w.details, "replica", int64_t{r});
      Set(w.details, "first_block", int64_t{split[static_cast<size_t>(s)].first});
      Set(w.details, "end_block", int64_t{split[static_cast<size_t>(s)].end});
      Set(w.details, "seconds_per_microbatch", split[static_cast<size_t>(s)].seconds);
      Set(w.details, "keep_blocks", int64_t{share.blocks.keep});
      Set(w.details, "recompute_blocks", int64_t{share.blocks.recompute});
      Set(w.details, "offload_blocks", int64_t{share.blocks.offload});
      plan.workers.push_back(std::move(w));
    }
  }
  for (const StageShare& s : split) {
    blocks.push_back(s.end - s.first);
    recomputed.push_back(s.blocks.recompute);
    offloaded.push_back(s.blocks.offload);
    predicted.push_back(s.seconds);
  }
  Record pipeline;
  Set(pipeline, "stages", int64_t{stages});
  Set(pipeline, "microbatches", int64_t{train.microbatches});
  Set(pipeline, "data_parallel", int64_t{replicas});
  Set(pipeline, "blocks_per_stage", blocks);
  Set(pipeline, "recompute_blocks_per_stage", recomputed);
  Set(pipeline, "offload_blocks_per_stage", offloaded);
  if (!spill.empty()) Set(pipeline, "spill_bandwidth", spill);
  Set(pipeline, "predicted_stage_seconds_per_microbatch", predicted);
  Set(pipeline, "predicted_step_seconds", step_seconds);
  Set(pipeline, "calibrated_block_seconds", costs.block_seconds);
  Set(pipeline, "calibrated_block_forward_seconds", costs.block_forward_seconds);
  Set(pipeline, "calibrated_head_seconds", costs.head_seconds);
  Set(pipeline, "calibrated_embedding_seconds", costs.embed_seconds);
  Set(pipeline, "process_bytes", costs.process_bytes);
  Set(plan.summary, "model", "gpt2");
  Set(plan.summary, "pipeline", pipeline);
  const int64_t c = model.width;
  const int64_t parameters = (int64_t{model.padded_vocab} + model.context) * c + model.layers * (12 * c * c + 13 * c) + 2 * c;
  Set(plan.summary, "parameters", parameters);
  Set(plan.summary, "tokens_per_step", train.global_batch() * train.seq_len);
  // The FLOPs of a training step by Megatron-LM's count (Narayanan et al. 2021, appendix): 72 B T L C^2
  // (1 + T / 6C + V / 12 L C): forward 2 and backward 4 per multiply-add, the attention's scores and
  // weighted sums over all T^2 pairs (the causal kernels skip half of them), the output head.
  const double tokens = static_cast<double>(train.global_batch()) * train.seq_len;
  const double l = model.layers, cw = static_cast<double>(c), tl = train.seq_len, v = model.vocab;
  Set(plan.summary, "flops_per_step", 72.0 * tokens * l * cw * cw * (1.0 + tl / (6.0 * cw) + v / (12.0 * l * cw)));
  plan.notes.push_back(StrCat("pipeline: ", stages, " stages x ", replicas, " replicas, ", train.microbatches,
                              " micro-batches of ", train.microbatch, " sequences of ", train.seq_len, " tokens"));
  return plan;
}

void StagePlanner::Print(const jobs::JobSpec& spec, const Plan& plan, std::ostream& out) const {
  char buf[200];
  std::snprintf(buf, sizeof buf, "job %s: llm / gpt2, %d layers, width %d, %d heads, context %d, vocabulary %d\n",
                spec.job.name.c_str(), spec.model.layers, spec.model.hidden, spec.model.heads, spec.model.context,
                spec.model.vocab_size);
  out << buf;
  const RecordValue* pv = Find(plan.summary, "pipeline");
  const Record* pipeline = pv ? std::get_if<Record>(&pv->data) : nullptr;
  if (pipeline) {
    std::snprintf(buf, sizeof buf,
                  "calibrated here (%d threads), per micro-batch forward + backward: block %.1f ms (forward %.1f ms), "
                  "embedding %.1f ms, head %.1f ms\n",
                  spec.resources.threads_per_worker, 1e3 * FindNumber(*pipeline, "calibrated_block_seconds").value_or(0),
                  1e3 * FindNumber(*pipeline, "calibrated_block_forward_seconds").value_or(0),
                  1e3 * FindNumber(*pipeline, "calibrated_embedding_seconds").value_or(0),
                  1e3 * FindNumber(*pipeline, "calibrated_head_seconds").value_or(0));
    out << buf;
  }
  std::snprintf(buf, sizeof buf, "%-6s %-8s %-22s %-22s %14s %12s\n", "worker", "stage", "blocks", "saved activations",
                "ms/microbatch", "memory");
  out << buf;
  for (size_t w = 0; w < plan.workers.size(); ++w) {
    const WorkerPlan& p = plan.workers[w];
    const auto i = [&](const char* k) { return static_cast<long long>(FindNumber(p.details, k).value_or(0)); };
    const long long s = i("stage"), first = i("first_block"), end = i("end_block");
    std::string what = StrCat(first, "..", end - 1);
    if (s == 0) what = "embed + " + what;
    if (s == spec.pipeline.stages - 1) what += " + head";
    const std::string stage = StrCat(s, " (r", i("replica"), ")");
    const long long keep = i("keep_blocks"), recompute = i("recompute_blocks"), offload = i("offload_blocks");
    std::string policy = keep > 0 ? StrCat("keep ", keep) : "";
    if (recompute > 0) policy += StrCat(policy.empty() ? "" : ", ", "recompute ", recompute);
    if (offload > 0) policy += StrCat(policy.empty() ? "" : ", ", "offload ", offload);
    std::snprintf(buf, sizeof buf, "%-6zu %-8s %-22s %-22s %14.1f %12s\n", w, stage.c_str(), what.c_str(),
                  policy.c_str(),
                  1e3 * FindNumber(p.details, "seconds_per_microbatch").value_or(0),
                  FormatBytes(p.predicted_memory_bytes).c_str());
    out << buf;
  }
  if (pipeline) {
    std::snprintf(buf, sizeof buf, "predicted step: %.3f s (1F1B: (%d micro-batches + %d stages - 1) x the slowest stage)\n",
                  FindNumber(*pipeline, "predicted_step_seconds").value_or(0), spec.pipeline.microbatches,
                  spec.pipeline.stages);
    out << buf;
  }
  const int64_t process = pipeline ? static_cast<int64_t>(FindNumber(*pipeline, "process_bytes").value_or(0)) : 0;
  if (process > 0) {
    out << "memory includes the process's own " << FormatBytes(process)
        << " (libraries, BLAS buffers, token data: measured here)\n";
  }
  if (spec.resources.memory_budget_bytes > 0) {
    out << "memory budget per worker: " << FormatBytes(spec.resources.memory_budget_bytes) << "\n";
  }
  for (const std::string& note : plan.notes) out << note << "\n";  // the spill measurement and choices
}

void StagePlanner::Publish(const Plan&, monitoring::Metrics&) const {}

}  // namespace tessel::orchestrator
