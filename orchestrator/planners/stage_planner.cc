#include "orchestrator/planners/stage_planner.h"

#include <algorithm>
#include <cstdio>
#include <ostream>
#include <string>
#include <vector>

#include "core/cuda_device.h"
#include "orchestrator/planners/stage_settings.h"
#include "storage/hf_gpt2.h"
#include "storage/llmc.h"
#include "storage/spill_store.h"
#include "workers/llm/token_data.h"

namespace tessel::orchestrator {

using workers::GptConfig;
using workers::LlmTrainSettings;

namespace {

// The memory budget against the plan's shapes alone, before the data and the calibration allocate
// anything (a budget too small was found only after a minute of calibration and gigabytes of its tensors):
// the split is searched with the stages' times left at 0 and without the process's own bytes, which the
// calibration measures, so what fails here fails after the calibration too.
Status CheckBudgetFromShapes(const jobs::JobSpec& spec, const GptConfig& model, const LlmTrainSettings& train,
                             const std::vector<SpillPolicy>& policies) {
  const int64_t budget = spec.resources.memory_budget_bytes;
  if (budget <= 0) return Status();
  const std::string origin = jobs::KeyOrigin(spec, "resources.memory_budget_bytes");
  // The largest stage of any split holds this many blocks; their parameters, gradients, AdamW moments and
  // host copy (20 bytes a parameter) counted in double, where a width such as 1e8 cannot overflow.
  const int32_t stages = spec.pipeline.stages;
  const int32_t blocks = (model.layers + stages - 1) / stages;
  const double c = model.width;
  const double least = 20.0 * blocks * (12.0 * c * c + 13.0 * c);
  if (least > static_cast<double>(budget)) {
    char need[32], short_by[32];
    std::snprintf(need, sizeof need, "%.3g", least);
    std::snprintf(short_by, sizeof short_by, "%.3g", least - static_cast<double>(budget));
    return UsageError(StrCat(origin, ": resources.memory_budget_bytes = ", budget, " cannot hold ", blocks,
                             " blocks of model.hidden = ", model.width,
                             " on one stage: their parameters, gradients "
                             "and AdamW moments alone take ",
                             need, " bytes, short by ", short_by,
                             " bytes; raise the budget, add stages or narrow the model"));
  }
  StageCosts shapes;
  shapes.tokens = int64_t{train.microbatch} * train.seq_len;
  shapes.width = model.width, shapes.heads = model.heads, shapes.vocab = model.vocab;
  shapes.padded_vocab = model.padded_vocab, shapes.context = model.context;
  shapes.precision = train.precision;
  return SplitStages(shapes, policies, stages, train.microbatches, budget, spec.pipeline.layers, origin).status();
}

}  // namespace

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
  std::vector<SpillPolicy>& policies = resolved.policies;
  if (!spec.model.init_from.empty()) {
    TESSEL_ASSIGN_OR_RETURN(storage::LlmcCheckpoint ck, storage::ReadGpt2Weights(spec.model.init_from));
    const storage::LlmcConfig& h = ck.config;
    model.padded_vocab = h.padded_vocab_size;
    if (h.num_layers != model.layers || h.channels != model.width || h.num_heads != model.heads ||
        h.max_seq_len != model.context || h.vocab_size != model.vocab) {
      return UsageError(StrCat(jobs::KeyOrigin(spec, "model.init_from"), ": ", spec.model.init_from,
                               " holds a GPT-2 of ", h.num_layers, " layers, width ", h.channels, ", ", h.num_heads,
                               " heads, context ", h.max_seq_len, ", vocabulary ", h.vocab_size, "; the job asks for ",
                               model.layers, ", ", model.width, ", ", model.heads, ", ", model.context, ", ",
                               model.vocab, " (set model.* to match)"));
    }
  }
  TESSEL_RETURN_IF_ERROR(CheckBudgetFromShapes(spec, model, train, policies));
  // The data, checked here so that bad input stops the job before any rank starts (exit 3).
  TESSEL_ASSIGN_OR_RETURN(workers::TokenSplits splits,
                          workers::LoadTokenSplits(data, model.vocab, train.global_batch(), train.seq_len));
  log.Info(StrCat("tokens: ", splits.train.size(), " to train on, ", splits.val.size(), " to validate on (",
                  splits.train_name, ")"));
  TESSEL_ASSIGN_OR_RETURN(StageCosts costs, Calibrate(spec, model, train));
  if (!costs.note.empty()) plan.notes.push_back(costs.note);
  // A GPU worker's tensors are in device memory, where the process's own host memory does not count.
  const bool on_cpu = spec.job.device == jobs::DeviceChoice::kCpu ||
                      (spec.job.device == jobs::DeviceChoice::kAuto && !ProbeCuda().usable());
  if (!on_cpu) costs.process_bytes = 0;
  TESSEL_ASSIGN_OR_RETURN(std::vector<StageShare> split,
                          SplitStages(costs, policies, stages, train.microbatches, spec.resources.memory_budget_bytes,
                                      spec.pipeline.layers, jobs::KeyOrigin(spec, "resources.memory_budget_bytes")));
  Record spill;
  const bool plans = std::find(resolved.planned.begin(), resolved.planned.end(), true) != resolved.planned.end();
  if (plans || std::find(policies.begin(), policies.end(), SpillPolicy::kOffload) != policies.end()) {
    // The spill directory is checked (exit 6) and its bandwidth measured before any rank starts.
    const int64_t block_bytes =
        costs.tokens * workers::RecomputeScratchBytesPerToken(costs.width, costs.heads, costs.precision);
    TESSEL_ASSIGN_OR_RETURN(const SpillBandwidth bandwidth, MeasureSpillBandwidth(spec, block_bytes));
    char line[400];
    if (bandwidth.measured()) {
      std::snprintf(line, sizeof line, "spill: %s writes %.2f GB/s (to the disk) and reads %.2f GB/s; %.1f MB a block",
                    storage::SpillDirectory(spec.spill.dir).c_str(), 1e-9 * bandwidth.write_bytes_per_second,
                    1e-9 * bandwidth.read_bytes_per_second, 1e-6 * static_cast<double>(block_bytes));
    } else {
      std::snprintf(line, sizeof line,
                    "spill: %s is (nearly) full, %.1f MB free: too little to measure; taken as full (an offloading "
                    "block recomputes when its write finds no space); %.1f MB a block",
                    storage::SpillDirectory(spec.spill.dir).c_str(),
                    1e-6 * static_cast<double>(std::max<int64_t>(bandwidth.free_bytes, 0)),
                    1e-6 * static_cast<double>(block_bytes));
    }
    plan.notes.push_back(line);
    Set(spill, "free_bytes", bandwidth.free_bytes);
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
  std::vector<double> blocks, recomputed, offloaded, predicted, memory, activations;
  for (int32_t r = 0; r < replicas; ++r) {
    for (int32_t s = 0; s < stages; ++s) {
      auto a = std::make_unique<workers::LlmStageAssignment>();
      a->model = model;
      a->train = train;
      a->data = data;
      a->place =
          workers::StagePlacement{s, stages, split[static_cast<size_t>(s)].first, split[static_cast<size_t>(s)].end, r};
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
    memory.push_back(static_cast<double>(s.memory_bytes));
    activations.push_back(static_cast<double>(
        StageActivationBytes(costs, static_cast<int32_t>(&s - split.data()), stages, s.blocks, train.microbatches)));
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
  // Against summary.json's peak_worker_rss_bytes and peak_resident_activation_bytes (tests/cluster/llm_pipeline.sh).
  Set(pipeline, "predicted_memory_bytes_per_stage", memory);
  Set(pipeline, "predicted_activation_bytes_per_stage", activations);
  Set(pipeline, "calibrated_block_seconds", costs.block_seconds);
  Set(pipeline, "calibrated_block_forward_seconds", costs.block_forward_seconds);
  Set(pipeline, "calibrated_head_seconds", costs.head_seconds);
  Set(pipeline, "calibrated_embedding_seconds", costs.embed_seconds);
  Set(pipeline, "process_bytes", costs.process_bytes);
  Set(pipeline, "calibrated_on", std::string(DeviceName(costs.device)));
  Set(pipeline, "calibration_seconds", costs.calibration_seconds);
  Set(plan.summary, "model", "gpt2");
  Set(plan.summary, "pipeline", pipeline);
  const int64_t c = model.width;
  const int64_t parameters =
      (int64_t{model.padded_vocab} + model.context) * c + model.layers * (12 * c * c + 13 * c) + 2 * c;
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
  std::snprintf(buf, sizeof buf, "job %s: llm / gpt2, %d layers, width %d, %d heads, context %d, vocabulary %d, %s\n",
                spec.job.name.c_str(), spec.model.layers, spec.model.hidden, spec.model.heads, spec.model.context,
                spec.model.vocab_size, std::string(NameOf(spec.train.precision)).c_str());
  out << buf;
  const RecordValue* pv = Find(plan.summary, "pipeline");
  const Record* pipeline = pv ? std::get_if<Record>(&pv->data) : nullptr;
  if (pipeline) {
    const RecordValue* on = Find(*pipeline, "calibrated_on");
    const std::string where = on != nullptr && std::get<std::string>(on->data) == "cuda"
                                  ? std::string("on GPU 0")
                                  : StrCat("on the CPU, ", spec.resources.threads_per_worker, " threads");
    std::snprintf(buf, sizeof buf,
                  "calibrated here (%s, %.1f s), per micro-batch forward + backward: block %.1f ms (forward %.1f ms), "
                  "embedding %.1f ms, head %.1f ms\n",
                  where.c_str(), FindNumber(*pipeline, "calibration_seconds").value_or(0),
                  1e3 * FindNumber(*pipeline, "calibrated_block_seconds").value_or(0),
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
                  policy.c_str(), 1e3 * FindNumber(p.details, "seconds_per_microbatch").value_or(0),
                  FormatBytes(p.predicted_memory_bytes).c_str());
    out << buf;
  }
  if (pipeline) {
    std::snprintf(
        buf, sizeof buf, "predicted step: %.3f s (1F1B: (%d micro-batches + %d stages - 1) x the slowest stage)\n",
        FindNumber(*pipeline, "predicted_step_seconds").value_or(0), spec.pipeline.microbatches, spec.pipeline.stages);
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
