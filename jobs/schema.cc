// The field table (kept at the top of the file, where a reader looks for it) and the value conversions
// it needs. See jobs/schema.h.
#include "jobs/schema.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <span>
#include <type_traits>

#include "core/logging.h"

namespace tessel::jobs {

namespace schema {
namespace {

// How a C++ member type maps onto a Value.
template <typename T>
struct Binder;

template <typename Int>
requires std::is_integral_v<Int> &&(!std::is_same_v<Int, bool>)struct Binder<Int> {
  static constexpr ValueType kType = ValueType::kInteger;
  static constexpr int64_t kMin = std::is_signed_v<Int> ? int64_t{std::numeric_limits<Int>::min()} : 0;
  static constexpr int64_t kMax = sizeof(Int) >= sizeof(int64_t)
                                      ? std::numeric_limits<int64_t>::max()
                                      : static_cast<int64_t>(std::numeric_limits<Int>::max());
  static Value ToValue(Int v) { return static_cast<int64_t>(v); }
  static void FromValue(Int& dst, const Value& v) { dst = static_cast<Int>(std::get<int64_t>(v)); }
};
template <>
struct Binder<double> {
  static constexpr ValueType kType = ValueType::kFloat;
  static Value ToValue(double v) { return v; }
  static void FromValue(double& dst, const Value& v) { dst = std::get<double>(v); }
};
template <>
struct Binder<bool> {
  static constexpr ValueType kType = ValueType::kBoolean;
  static Value ToValue(bool v) { return v; }
  static void FromValue(bool& dst, const Value& v) { dst = std::get<bool>(v); }
};
template <>
struct Binder<std::string> {
  static constexpr ValueType kType = ValueType::kString;
  static Value ToValue(const std::string& v) { return v; }
  static void FromValue(std::string& dst, const Value& v) { dst = std::get<std::string>(v); }
};
template <>
struct Binder<std::vector<std::string>> {
  static constexpr ValueType kType = ValueType::kStringArray;
  static Value ToValue(const std::vector<std::string>& v) { return v; }
  static void FromValue(std::vector<std::string>& dst, const Value& v) { dst = std::get<std::vector<std::string>>(v); }
};
template <>
struct Binder<std::vector<int32_t>> {
  static constexpr ValueType kType = ValueType::kIntegerArray;
  static Value ToValue(const std::vector<int32_t>& v) { return std::vector<int64_t>(v.begin(), v.end()); }
  static void FromValue(std::vector<int32_t>& dst, const Value& v) {
    const auto& values = std::get<std::vector<int64_t>>(v);
    dst.assign(values.begin(), values.end());
  }
};
// An array of enums travels as an array of their TOML names; its field's constraint lists the names it
// takes (a subset of NamesOf(E{})), and Convert() has checked every element against them.
template <typename E>
requires std::is_enum_v<E>
struct Binder<std::vector<E>> {
  static constexpr ValueType kType = ValueType::kStringArray;
  static Value ToValue(const std::vector<E>& v) {
    std::vector<std::string> names;
    for (E e : v) names.emplace_back(NamesOf(e)[static_cast<size_t>(e)]);
    return names;
  }
  static void FromValue(std::vector<E>& dst, const Value& v) {
    const auto names = NamesOf(E{});
    dst.clear();
    for (const std::string& name : std::get<std::vector<std::string>>(v)) {
      for (size_t i = 0; i < names.size(); ++i) {
        if (names[i] == name) dst.push_back(static_cast<E>(i));
      }
    }
  }
};
// Enums travel as their TOML name; Convert() has already checked it is one of NamesOf(E{}).
template <typename E>
requires std::is_enum_v<E>
struct Binder<E> {
  static constexpr ValueType kType = ValueType::kString;
  static Value ToValue(E v) { return std::string(NamesOf(v)[static_cast<size_t>(v)]); }
  static void FromValue(E& dst, const Value& v) {
    const auto names = NamesOf(E{});
    for (size_t i = 0; i < names.size(); ++i) {
      if (names[i] == std::get<std::string>(v)) dst = static_cast<E>(i);
    }
  }
};

// `get` is a generic lambda returning a reference to the member, so one accessor serves set and get.
template <typename Get>
Field MakeField(std::string_view key, Effect effect, Get get, Constraint constraint, std::string_view doc) {
  using T = std::remove_reference_t<std::invoke_result_t<Get, JobSpec&>>;
  using B = Binder<T>;
  Field f;
  f.key = key;
  f.effect = effect;
  f.type = constraint.bytes ? ValueType::kBytes : B::kType;
  if constexpr (B::kType == ValueType::kInteger) {
    f.type_min = B::kMin;
    f.type_max = B::kMax;
  }
  // An enum takes every name of its choice, unless the row lists the subset a job file may use.
  if constexpr (std::is_enum_v<T>) {
    const auto names = NamesOf(T{});
    if (constraint.choices.empty()) constraint.choices.assign(names.begin(), names.end());
  }
  f.constraint = std::move(constraint);
  f.doc = doc;
  f.set = [get](JobSpec& s, const Value& v) { B::FromValue(get(s), v); };
  f.get = [get](const JobSpec& s) { return B::ToValue(get(s)); };
  return f;
}

// The key path in the file is the member path in JobSpec, so the macro spells it once for both. The macro
// also says what the key does to a resume (Effect): TESSEL_JOB_FIELD changes the trajectory,
// TESSEL_INPUT_FIELD names input files that do, TESSEL_RUN_FIELD changes only how the run goes.
#define TESSEL_FIELD_WITH_EFFECT(path, effect, constraint, doc) \
  MakeField(                                                    \
      #path, effect, [](auto& s) -> auto& { return s.path; }, constraint, doc)
#define TESSEL_JOB_FIELD(path, constraint, doc) TESSEL_FIELD_WITH_EFFECT(path, Effect::kTrajectory, constraint, doc)
#define TESSEL_INPUT_FIELD(path, constraint, doc) TESSEL_FIELD_WITH_EFFECT(path, Effect::kInputFile, constraint, doc)
#define TESSEL_RUN_FIELD(path, constraint, doc) TESSEL_FIELD_WITH_EFFECT(path, Effect::kRunOnly, constraint, doc)

std::vector<Field> BuildFields() {
  return {
      // [job]
      TESSEL_RUN_FIELD(job.name, Required(),
                       "Names the run: run directory, metric label, summary.json. Letters, digits, '.', '_', '-'."),
      TESSEL_JOB_FIELD(job.kind, Required(),
                       "What is trained: \"rgnn\" (relational GNN) or \"llm\" (a GPT-2 decoder in pipeline stages)."),
      TESSEL_JOB_FIELD(job.seed, AtLeast(0), "Seed of weight initialisation and sampling."),
      TESSEL_RUN_FIELD(job.device, Any(), "Where workers compute; \"auto\" picks CUDA when a GPU is visible."),
      TESSEL_RUN_FIELD(job.time_limit_seconds, AtLeast(0),
                       "Wall-clock limit of the whole run; 0 = none. When it passes, the run stops after the step in "
                       "progress as on SIGUSR1: checkpoint saved, exit 7."),
      TESSEL_RUN_FIELD(job.output_dir, Any(), "Run directory; \"\" = runs/NAME-TIMESTAMP (UTC)."),
      TESSEL_RUN_FIELD(job.log_level, Any(), "Least severe log level printed."),
      // [resources]
      TESSEL_RUN_FIELD(resources.workers, AtLeast(1), "Worker ranks: mpirun -np workers+1 (rank 0 coordinates)."),
      TESSEL_RUN_FIELD(
          resources.threads_per_worker, AtLeast(1).AtMost(1024),
          "CPU threads per worker (kernels and BLAS); each worker also refuses more than its host's cores."),
      TESSEL_RUN_FIELD(resources.gpus_per_worker, AtLeast(0),
                       "GPUs per worker; > 0 needs job.device \"auto\" or \"cuda\"."),
      TESSEL_RUN_FIELD(resources.memory_budget_bytes, Bytes(),
                       "Memory one worker may use; the plan must fit it. 0 = unlimited."),
      // [data]
      TESSEL_JOB_FIELD(data.format, Required(),
                       "Where the graph (rgnn) or the tokens (llm: text, llmc, generated_text) come from."),
      TESSEL_INPUT_FIELD(data.graph, Any(),
                         "Graph file (.h5): the input for \"graph\", else the import cache (\"\" = no cache)."),
      TESSEL_INPUT_FIELD(data.triples, Any(), "RDF N-Triples file, plain or .gz (format \"rdf\")."),
      TESSEL_INPUT_FIELD(data.train_labels, Any(),
                         "TSV of training labels with a header row: entity, ..., class (format \"rdf\")."),
      TESSEL_INPUT_FIELD(data.test_labels, Any(),
                         "TSV of test labels, laid out as data.train_labels (format \"rdf\")."),
      TESSEL_INPUT_FIELD(data.edges, Any(),
                         "Edge lists of head TAB relation TAB tail lines; plain, .gz or tar (format \"edges\")."),
      TESSEL_INPUT_FIELD(data.partitions, Any(),
                         "Directory written by tessel partition (format \"partitions\"): each worker reads its own "
                         "part-K.h5, the coordinator only partition.json."),
      TESSEL_JOB_FIELD(data.add_inverse, Any(),
                       "Add an inverse relation per relation (\"edges\", \"synthetic\"; \"rdf\" always does)."),
      TESSEL_RUN_FIELD(data.feature_store, OneOf({"auto", "mapped", "pinned"}),
                       "Sampled: where a worker reads its feature rows: \"mapped\" from the graph file in place, "
                       "\"pinned\" into (page-locked) memory, \"auto\" = mapped on CPU, pinned on GPU."),
      TESSEL_RUN_FIELD(data.feature_gather, OneOf({"auto", "host", "zero_copy"}),
                       "Sampled, GPU workers: \"zero_copy\" = the GPU reads a batch's rows from the pinned store in "
                       "place, \"host\" = gathered on the host and copied up, \"auto\" = zero_copy where it can run."),
      TESSEL_RUN_FIELD(data.structure, OneOf({"auto", "replicated", "partitioned"}),
                       "Sampled: \"replicated\" = every worker holds the whole graph's in-edges, \"partitioned\" = "
                       "only its own, owners drawing their nodes' neighbours; \"auto\" = partitioned with "
                       "data.partitions, else replicated."),
      TESSEL_JOB_FIELD(data.add_self_loop, Any(),
                       "Add a self-loop relation per node type (\"edges\", \"synthetic\"; \"rdf\" always does)."),
      TESSEL_INPUT_FIELD(data.text, Any(), "llm: a text file, each byte one token (format \"text\")."),
      TESSEL_INPUT_FIELD(data.train_tokens, Any(), "llm: an llm.c token file to train on (format \"llmc\")."),
      TESSEL_INPUT_FIELD(data.val_tokens, Any(),
                         "llm: an llm.c token file to validate on (format \"llmc\"); \"\" = the tail of train_tokens."),
      TESSEL_JOB_FIELD(data.val_fraction, AtLeast(0).Below(1),
                       "llm: the share of the tokens, at the end, held out for validation (unless val_tokens is set)."),
      TESSEL_JOB_FIELD(data.generated_bytes, Bytes(), "llm: bytes of text to generate (format \"generated_text\")."),
      TESSEL_JOB_FIELD(data.order, Any(),
                       "llm: \"sequential\" (batch k starts at token k x batch_size x seq_len, as llm.c) or "
                       "\"shuffled\" (seeded)."),
      // [data.synthetic]
      TESSEL_JOB_FIELD(data.synthetic.nodes, AtLeast(1), "Nodes in all, split across the node types."),
      TESSEL_JOB_FIELD(data.synthetic.node_types, AtLeast(1), "Node types."),
      TESSEL_JOB_FIELD(data.synthetic.relations, AtLeast(1), "Relations, before inverses and self-loops."),
      TESSEL_JOB_FIELD(data.synthetic.classes, AtLeast(2), "Label classes."),
      TESSEL_JOB_FIELD(data.synthetic.avg_degree, Above(0),
                       "Mean degree (in + out) of a node over the base relations."),
      TESSEL_JOB_FIELD(data.synthetic.feature_dim, AtLeast(0), "Input feature width; 0 = no features."),
      TESSEL_JOB_FIELD(data.synthetic.train_fraction, Above(0).Below(1), "Fraction of labelled nodes to train on."),
      TESSEL_JOB_FIELD(data.synthetic.test_fraction, AtLeast(0).Below(1), "Fraction of labelled nodes to test on."),
      TESSEL_JOB_FIELD(data.synthetic.seed, AtLeast(0), "Seed of the generator, independent of job.seed."),
      // [model]
      TESSEL_JOB_FIELD(
          model.name, NonEmpty(),
          "Architecture: \"rgcn\", \"rgat\", \"hgt\" or another registered RGNN model (rgnn); \"gpt2\" (llm)."),
      TESSEL_JOB_FIELD(model.layers, AtLeast(1),
                       "Message-passing layers (RGCN/RGAT: the last outputs class scores; HGT: a classifier follows); "
                       "gpt2: blocks."),
      TESSEL_JOB_FIELD(model.hidden, AtLeast(1), "Width of the hidden layers (gpt2: the residual width C)."),
      TESSEL_JOB_FIELD(model.input, Any(),
                       "First-layer input; \"auto\" = features where the graph has them, else one-hot."),
      TESSEL_JOB_FIELD(model.num_bases, AtLeast(0), "RGCN basis decomposition: W_r = sum_b a_rb V_b; 0 = none."),
      TESSEL_JOB_FIELD(model.num_blocks, AtLeast(0),
                       "RGCN block-diagonal decomposition into this many blocks; 0 = none."),
      TESSEL_JOB_FIELD(model.heads, AtLeast(1), "Attention heads (RGAT, HGT, gpt2)."),
      TESSEL_JOB_FIELD(model.head_merge, Any(), "RGAT hidden layers: concatenate or average the heads."),
      TESSEL_JOB_FIELD(model.weight_init, Any(),
                       "RGNN weights: \"glorot\" (zero biases) or \"torch_linear\" (U(+-1/sqrt(fan_in)), "
                       "biases too: PyG's HGTConv default)."),
      TESSEL_JOB_FIELD(model.compact, Any(),
                       "Compact materialisation (once per unique relation-node pair); false = once per edge."),
      TESSEL_JOB_FIELD(model.reorder, Any(),
                       "Linear-operator reordering (weights after aggregation, W_r a_r precomputed); false = off."),
      TESSEL_JOB_FIELD(model.context, AtLeast(1),
                       "gpt2: positions the model has (wpe rows); train.seq_len is at most this."),
      TESSEL_JOB_FIELD(model.vocab_size, AtLeast(2).AtMost(65536), "gpt2: vocabulary size; 256 = bytes."),
      TESSEL_INPUT_FIELD(model.init_from, Any(),
                         "gpt2: an llm.c GPT-2 checkpoint (version 3), or a Hugging Face GPT2LMHeadModel directory "
                         "(config.json, model.safetensors), to start from; \"\" = initialised from job.seed."),
      // [train]
      TESSEL_JOB_FIELD(train.mode, Any(),
                       "\"full\": full-graph training; \"sampled\": mini-batches of sampled neighbourhoods."),
      TESSEL_RUN_FIELD(train.epochs, AtLeast(1), "Full passes over the training nodes."),
      TESSEL_JOB_FIELD(train.lr, Above(0), "Learning rate."),
      TESSEL_JOB_FIELD(train.l2, AtLeast(0),
                       "rgnn: the R-GCN paper's penalty l2 x sum(w^2) over every parameter of the first layer, added "
                       "to the loss (torch's weight_decay = 2 x l2)."),
      TESSEL_JOB_FIELD(train.optimizer, Any(), "Optimizer."),
      TESSEL_RUN_FIELD(train.log_every, AtLeast(1), "Epochs (llm: steps) between progress lines."),
      TESSEL_JOB_FIELD(train.fanouts, Any(),
                       "Sampled: neighbours drawn per node, one entry per layer from the input layer up (DGL's "
                       "order; PyG's num_neighbors lists them the other way round); -1 = all; [] = 10 per layer."),
      TESSEL_JOB_FIELD(train.fanout_per, Any(),
                       "Sampled: a fanout counts the neighbours of a node in all (\"total\") or per relation."),
      TESSEL_JOB_FIELD(train.batch_size, AtLeast(1),
                       "Sampled: training nodes per mini-batch, over all workers; llm: sequences per step, over all "
                       "replicas."),
      TESSEL_RUN_FIELD(train.eval_fanouts, Any(),
                       "Sampled: fanouts of the final evaluation; [] = every neighbour (as full-graph training)."),
      TESSEL_RUN_FIELD(train.prefetch, Any(), "Sampled: prepare batch k+1 (sampling, features) while batch k trains."),
      TESSEL_RUN_FIELD(train.halo, OneOf({"resident", "streamed"}),
                       "Full graph: \"resident\" = a worker keeps its halo rows of every layer's input; \"streamed\" "
                       "= none, each peer's rows are used as they arrive and fetched again for backward (RGCN)."),
      TESSEL_RUN_FIELD(train.steps, AtLeast(0), "llm: optimizer steps (0: only validate and write the weights)."),
      TESSEL_JOB_FIELD(train.seq_len, AtLeast(0), "llm: tokens per sequence; 0 = model.context."),
      TESSEL_JOB_FIELD(train.microbatch_size, AtLeast(0),
                       "llm: sequences per micro-batch; 0 = batch_size / (microbatches x data_parallel)."),
      TESSEL_JOB_FIELD(train.beta1, AtLeast(0).Below(1), "Adam (rgnn) and AdamW (llm) beta1."),
      TESSEL_JOB_FIELD(train.beta2, AtLeast(0).Below(1), "Adam (rgnn) and AdamW (llm) beta2."),
      TESSEL_JOB_FIELD(train.eps, AtLeast(0), "Adam (rgnn) and AdamW (llm) epsilon."),
      TESSEL_JOB_FIELD(train.weight_decay, AtLeast(0), "llm: AdamW decoupled weight decay, on the 2-D parameters."),
      TESSEL_JOB_FIELD(train.grad_clip, AtLeast(0), "llm: clip the global gradient norm to this; 0 = no clipping."),
      TESSEL_JOB_FIELD(train.warmup_steps, AtLeast(0), "llm: steps of linear learning-rate warm-up."),
      TESSEL_JOB_FIELD(train.final_lr_fraction, AtLeast(0).AtMost(1),
                       "llm: cosine decay after warm-up to lr x this at the last step; 1 = constant."),
      TESSEL_RUN_FIELD(train.val_every, AtLeast(0), "llm: steps between validation losses; 0 = at the end only."),
      TESSEL_RUN_FIELD(train.val_batches, AtLeast(0),
                       "llm: batches of batch_size sequences per validation; 0 = the whole validation split."),
      TESSEL_JOB_FIELD(train.precision, Any(),
                       "llm: \"fp32\", or \"bf16\": bf16 activations and matmuls with f32 accumulation, f32 master "
                       "weights, gradients and AdamW moments, f32 LayerNorm statistics and loss. rgnn: \"fp32\", or "
                       "\"fp64\" throughout (full graph, one CPU worker)."),
      TESSEL_RUN_FIELD(train.on_bad_loss, Any(),
                       "A loss that becomes NaN or infinite, or explodes (see bad_loss_factor): \"stop\" ends the job "
                       "with exit 8 and keeps the checkpoints before it; \"warn\" logs it and trains on."),
      TESSEL_RUN_FIELD(train.bad_loss_factor, Above(1),
                       "A loss above this x the median of the last bad_loss_window steps' losses, and above the first "
                       "step's loss, has exploded."),
      TESSEL_RUN_FIELD(train.bad_loss_window, AtLeast(1),
                       "Steps (epochs for rgnn) whose median a loss is compared with."),
      // [partition]
      TESSEL_JOB_FIELD(partition.method, Any(), "How nodes are split across workers."),
      TESSEL_JOB_FIELD(partition.seed, AtLeast(0), "Seed of the partitioner."),
      // [pipeline]
      TESSEL_JOB_FIELD(pipeline.stages, AtLeast(1), "llm: pipeline stages the layers are split into."),
      TESSEL_JOB_FIELD(pipeline.microbatches, AtLeast(1),
                       "llm: micro-batches per step and pipeline, scheduled 1F1B (gradient accumulation)."),
      TESSEL_JOB_FIELD(pipeline.data_parallel, AtLeast(1),
                       "llm: replicas of the pipeline; stages x data_parallel = resources.workers."),
      TESSEL_JOB_FIELD(pipeline.layers, Any(),
                       "llm: transformer blocks per stage, first stage first; [] = the stage planner splits them."),
      // [spill]
      TESSEL_RUN_FIELD(
          spill.dir, Any(),
          "Directory of the per-worker HDF5 spill files (local NVMe is best); empty: this user's "
          "/tmp/tessel-UID/spill. Created 0700; an existing one must be this user's and writable by no one else."),
      TESSEL_RUN_FIELD(spill.budget_bytes, Bytes(), "Spill file size limit per worker; 0 = unlimited."),
      TESSEL_RUN_FIELD(spill.policy, Any(),
                       "llm: what a block keeps for its backward: everything (keep), its input only (recompute), "
                       "or its input while the rest goes to the spill file (offload); \"auto\" offloads the blocks "
                       "whose I/O the measured disk hides; \"plan\" lets the planner choose each block's policy "
                       "under resources.memory_budget_bytes."),
      TESSEL_RUN_FIELD(spill.layer_policies, OneOf({"keep", "recompute", "offload"}),
                       "llm: a policy per block, first block first (model.layers entries); [] = every block follows "
                       "spill.policy."),
      TESSEL_RUN_FIELD(spill.checksum, Any(), "Fletcher32 checksum on every spilled tensor."),
      // [checkpoint]
      TESSEL_RUN_FIELD(checkpoint.dir, Any(), "Checkpoint directory; \"\" = OUTPUT_DIR/checkpoints."),
      TESSEL_RUN_FIELD(checkpoint.every_steps, AtLeast(0), "Steps between checkpoints; 0 = none."),
      TESSEL_RUN_FIELD(checkpoint.keep, AtLeast(1), "Checkpoints kept; older ones are deleted."),
      // [plugins]
      TESSEL_RUN_FIELD(plugins.paths, Any(),
                       "Plugin .so files to load; with search_dirs, replaces the default (the built-in plugins beside "
                       "the executable)."),
      TESSEL_RUN_FIELD(
          plugins.search_dirs, Any(),
          "Directories whose libtessel_*.so files are loaded; list build/plugins here to keep the built-ins."),
      TESSEL_RUN_FIELD(plugins.prefer, Any(),
                       "Plugin names, most preferred first: which plugin serves an op (on a device) that several "
                       "loaded plugins offer. Without it such an op is an error naming them."),
      // [metrics]
      TESSEL_RUN_FIELD(
          metrics.bind, NonEmpty(),
          "Address every rank's exporter listens on; any but loopback is warned about (the exporter has no password)."),
      TESSEL_RUN_FIELD(metrics.port_base, AtLeast(0).AtMost(65535),
                       "Rank r listens on port_base + r; 0 = no exporter."),
      TESSEL_RUN_FIELD(metrics.targets_file, Any(), "Prometheus file_sd targets file; \"\" = OUTPUT_DIR/targets.json."),
      TESSEL_RUN_FIELD(metrics.pushgateway, Any(), "Pushgateway URL for the final metrics; \"\" = none."),
      TESSEL_RUN_FIELD(metrics.straggler_factor, Above(1),
                       "A worker whose median compute time (step time less waits on peers) over a straggler window is "
                       "this x the fastest worker's is named a straggler (log warning, tessel_straggler_score)."),
      TESSEL_RUN_FIELD(metrics.straggler_window, AtLeast(1), "Steps (epochs for rgnn) per straggler window."),
      TESSEL_RUN_FIELD(metrics.kernel_sample_every, AtLeast(0),
                       "Every kernel call of steps 1, 1 + n, 1 + 2n, ... is timed, by op and device "
                       "(tessel_kernel_seconds_total); 0 = never."),
      TESSEL_RUN_FIELD(
          metrics.final_scrape_seconds, AtLeast(0).AtMost(30),
          "After a failure during training, the coordinator keeps its exporter up this long before it ends the job, so "
          "that Prometheus scrapes the failure (tessel_job_state, tessel_bad_loss_total) and the alerts "
          "fire; 0 = end at once; at most 30 (the workers wait 60 s for the end). Without an exporter (port_base = 0) "
          "there is no wait."),
      // [timeouts]
      TESSEL_RUN_FIELD(timeouts.heartbeat_interval_seconds, Above(0),
                       "Seconds between heartbeats of each rank (workers to the coordinator, and the coordinator "
                       "to every worker)."),
      TESSEL_RUN_FIELD(timeouts.heartbeat_timeout_seconds, Above(0),
                       "A rank silent this long has failed (exit 5): a worker, for the coordinator, which aborts "
                       "the job; the coordinator, for each worker, which then stops; > 2 x the interval."),
      TESSEL_RUN_FIELD(timeouts.startup_seconds, Above(0), "Limit for every rank to start and report ready."),
      TESSEL_RUN_FIELD(timeouts.step_seconds, Above(0),
                       "Limit for one training step on any rank, an embedded run's included (its first step, which "
                       "loads the data, gets `startup_seconds` more)."),
      // [smoke]
      TESSEL_RUN_FIELD(smoke.max_latency_us, Above(0),
                       "tessel smoke: point-to-point latency with rank 0 (one way, 8 bytes) at most this."),
      TESSEL_RUN_FIELD(smoke.min_bandwidth_mb_s, AtLeast(0),
                       "tessel smoke: point-to-point bandwidth with rank 0 (4 MiB messages) at least this, in MB/s."),
      TESSEL_RUN_FIELD(smoke.max_allreduce_ms, Above(0),
                       "tessel smoke: a 1 MiB float allreduce over all ranks takes at most this."),
      TESSEL_RUN_FIELD(smoke.min_spill_free_mb, AtLeast(0),
                       "tessel smoke: free space in each rank's spill.dir at least this, in MB."),
      TESSEL_RUN_FIELD(smoke.min_spill_mb_s, AtLeast(0),
                       "tessel smoke: spill.dir's write and read bandwidth at least this, in MB/s."),
      TESSEL_RUN_FIELD(smoke.min_gpus, AtLeast(0),
                       "tessel smoke: usable GPUs each rank sees; job.device = \"cuda\" asks at least 1."),
      TESSEL_RUN_FIELD(smoke.timeout_seconds, Above(0), "tessel smoke: a rank whose message takes longer FAILs."),
  };
}

#undef TESSEL_RUN_FIELD
#undef TESSEL_INPUT_FIELD
#undef TESSEL_JOB_FIELD
#undef TESSEL_FIELD_WITH_EFFECT

std::string_view ExpectedText(ValueType type) {
  switch (type) {
    case ValueType::kInteger:
      return "an integer";
    case ValueType::kFloat:
      return "a number";
    case ValueType::kBoolean:
      return "a boolean";
    case ValueType::kString:
      return "a string";
    case ValueType::kStringArray:
      return "an array of strings";
    case ValueType::kIntegerArray:
      return "an array of integers";
    case ValueType::kBytes:
      return "a byte count (an integer, or a string such as \"64GiB\")";
  }
  return "?";
}

Status TypeMismatch(ValueType expected, const toml::node& node) {
  return UsageError(StrCat("expected ", ExpectedText(expected), ", got ", NodeTypeName(node)));
}

std::string ChoicesText(const std::vector<std::string_view>& choices) {
  std::string out;
  for (size_t i = 0; i < choices.size(); ++i) out += StrCat(i ? ", " : "", QuoteToml(choices[i]));
  return out;
}

// "64GiB", "1.5 TB", "4096" -> bytes. Decimal (KB = 1000) and binary (KiB = 1024) units.
Result<int64_t> ParseByteSize(std::string_view text) {
  static constexpr std::pair<std::string_view, double> kUnits[] = {{"", 1},
                                                                   {"B", 1},
                                                                   {"KB", 1e3},
                                                                   {"MB", 1e6},
                                                                   {"GB", 1e9},
                                                                   {"TB", 1e12},
                                                                   {"KiB", 1ULL << 10},
                                                                   {"MiB", 1ULL << 20},
                                                                   {"GiB", 1ULL << 30},
                                                                   {"TiB", 1ULL << 40}};
  const auto bad = [&] {
    return UsageError(
        StrCat("expected a byte count such as \"64GiB\" (units B, KB, MB, GB, TB, KiB, MiB, GiB, "
               "TiB), got ",
               QuoteToml(text)));
  };
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
  double number = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + i, number);
  if (i == 0 || ec != std::errc() || end != text.data() + i) return bad();
  std::string_view unit = text.substr(i);
  while (!unit.empty() && unit.front() == ' ') unit.remove_prefix(1);
  for (const auto& [name, scale] : kUnits) {
    if (unit != name) continue;
    const double bytes = std::round(number * scale);
    if (bytes >= 9.2e18) return UsageError(StrCat("byte count ", QuoteToml(text), " is too large"));
    return static_cast<int64_t>(bytes);
  }
  return bad();
}

}  // namespace

Constraint Constraint::AtMost(double v) const {
  Constraint c = *this;
  c.max = v;
  c.max_exclusive = false;
  return c;
}
Constraint Constraint::Below(double v) const {
  Constraint c = *this;
  c.max = v;
  c.max_exclusive = true;
  return c;
}
Constraint Any() { return {}; }
Constraint Required() {
  Constraint c;
  c.required = true;
  return c;
}
Constraint NonEmpty() {
  Constraint c;
  c.non_empty = true;
  return c;
}
Constraint AtLeast(double v) {
  Constraint c;
  c.min = v;
  return c;
}
Constraint Above(double v) {
  Constraint c = AtLeast(v);
  c.min_exclusive = true;
  return c;
}
Constraint Bytes() {
  Constraint c = AtLeast(0);
  c.bytes = true;
  return c;
}
Constraint OneOf(std::vector<std::string_view> choices) {
  Constraint c;
  c.choices = std::move(choices);
  return c;
}

const std::vector<Field>& Fields() {
  static const std::vector<Field> fields = WithModelKeyRows(BuildFields());
  return fields;
}

const Field* FindField(std::string_view key) {
  for (const Field& f : Fields()) {
    if (f.key == key) return &f;
  }
  return nullptr;
}

bool IsSection(std::string_view key) {
  for (const Field& f : Fields()) {
    if (f.key.size() > key.size() && f.key.starts_with(key) && f.key[key.size()] == '.') return true;
  }
  return false;
}

std::vector<std::string> SectionNames() {
  std::vector<std::string> out;
  for (const Field& f : Fields()) {
    std::string_view k = f.key;
    for (size_t dot = k.find('.'); dot != std::string_view::npos; dot = k.find('.', dot + 1)) {
      std::string section(k.substr(0, dot));
      if (std::find(out.begin(), out.end(), section) == out.end()) out.push_back(section);
    }
  }
  return out;
}

Result<Value> Convert(const Field& field, const toml::node& node) {
  switch (field.type) {
    case ValueType::kInteger: {
      const auto* v = node.as_integer();
      if (!v) return TypeMismatch(field.type, node);
      const int64_t x = v->get();
      if (x < field.type_min || x > field.type_max) {
        return UsageError(StrCat("must be between ", field.type_min, " and ", field.type_max, ", got ", x));
      }
      return Value(x);
    }
    case ValueType::kBytes: {
      if (const auto* v = node.as_integer()) return Value(v->get());
      const auto* s = node.as_string();
      if (!s) return TypeMismatch(field.type, node);
      TESSEL_ASSIGN_OR_RETURN(int64_t bytes, ParseByteSize(s->get()));
      return Value(bytes);
    }
    case ValueType::kFloat: {
      double x = 0;
      if (const auto* i = node.as_integer()) {
        x = static_cast<double>(i->get());
      } else if (const auto* f = node.as_floating_point()) {
        x = f->get();
      } else {
        return TypeMismatch(field.type, node);
      }
      if (!std::isfinite(x)) return UsageError(StrCat("expected a finite number, got ", FormatNumber(x)));
      return Value(x);
    }
    case ValueType::kBoolean: {
      const auto* v = node.as_boolean();
      if (!v) return TypeMismatch(field.type, node);
      return Value(v->get());
    }
    case ValueType::kString: {
      const auto* v = node.as_string();
      if (!v) return TypeMismatch(field.type, node);
      Value value(v->get());
      // Enum-like fields are checked here, because an enum member cannot hold a wrong name.
      if (std::string problem = CheckConstraint(field, value); !problem.empty()) return UsageError(problem);
      return value;
    }
    case ValueType::kStringArray: {
      const auto* arr = node.as_array();
      if (!arr) return TypeMismatch(field.type, node);
      std::vector<std::string> out;
      for (size_t i = 0; i < arr->size(); ++i) {
        const auto* s = (*arr)[i].as_string();
        if (!s) {
          return UsageError(StrCat("expected an array of strings, but element ", i, " is ", NodeTypeName((*arr)[i])));
        }
        out.push_back(s->get());
      }
      Value value(std::move(out));
      if (std::string problem = CheckConstraint(field, value); !problem.empty()) return UsageError(problem);
      return value;
    }
    case ValueType::kIntegerArray: {
      const auto* arr = node.as_array();
      if (!arr) return TypeMismatch(field.type, node);
      std::vector<int64_t> out;
      for (size_t i = 0; i < arr->size(); ++i) {
        const auto* v = (*arr)[i].as_integer();
        if (!v) {
          return UsageError(StrCat("expected an array of integers, but element ", i, " is ", NodeTypeName((*arr)[i])));
        }
        if (v->get() < std::numeric_limits<int32_t>::min() || v->get() > std::numeric_limits<int32_t>::max()) {
          return UsageError(StrCat("element ", i, " = ", v->get(), " is out of range"));
        }
        out.push_back(v->get());
      }
      return Value(std::move(out));
    }
  }
  return InternalError("unknown value type");
}

std::string CheckConstraint(const Field& field, const Value& value) {
  const Constraint& c = field.constraint;
  if (const auto* s = std::get_if<std::string>(&value)) {
    if (c.non_empty && s->empty()) return "must not be empty";
    if (!c.choices.empty() && std::find(c.choices.begin(), c.choices.end(), *s) == c.choices.end()) {
      return StrCat(QuoteToml(*s), " is not allowed; allowed values: ", ChoicesText(c.choices));
    }
    return "";
  }
  if (const auto* v = std::get_if<std::vector<std::string>>(&value)) {
    for (size_t i = 0; i < v->size() && !c.choices.empty(); ++i) {
      if (std::find(c.choices.begin(), c.choices.end(), (*v)[i]) == c.choices.end()) {
        return StrCat("element ", i, " = ", QuoteToml((*v)[i]),
                      " is not allowed; allowed values: ", ChoicesText(c.choices));
      }
    }
    return "";
  }
  double x = 0;
  std::string text;
  if (const auto* i = std::get_if<int64_t>(&value)) {
    x = static_cast<double>(*i);
    text = std::to_string(*i);
  } else if (const auto* d = std::get_if<double>(&value)) {
    x = *d;
    text = FormatNumber(*d);
  } else {
    return "";
  }
  const bool below_min = c.min && (c.min_exclusive ? x <= *c.min : x < *c.min);
  const bool above_max = c.max && (c.max_exclusive ? x >= *c.max : x > *c.max);
  if (below_min || above_max) return StrCat("must be ", DescribeAllowed(field), ", got ", text);
  return "";
}

std::string_view NodeTypeName(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::table:
      return "table";
    case toml::node_type::array:
      return "array";
    case toml::node_type::string:
      return "string";
    case toml::node_type::integer:
      return "integer";
    case toml::node_type::floating_point:
      return "float";
    case toml::node_type::boolean:
      return "boolean";
    case toml::node_type::date:
      return "date";
    case toml::node_type::time:
      return "time";
    case toml::node_type::date_time:
      return "date-time";
    default:
      return "nothing";
  }
}

std::string_view TypeName(ValueType type) {
  switch (type) {
    case ValueType::kInteger:
      return "integer";
    case ValueType::kFloat:
      return "float";
    case ValueType::kBoolean:
      return "boolean";
    case ValueType::kString:
      return "string";
    case ValueType::kStringArray:
      return "array of strings";
    case ValueType::kIntegerArray:
      return "array of integers";
    case ValueType::kBytes:
      return "bytes";
  }
  return "?";
}

void ErrorList::Add(std::string_view origin, std::string_view message) {
  lines_.push_back(StrCat(origin, ": ", message));
}

Status ErrorList::ToStatus() const {
  if (lines_.empty()) return Status::Ok();
  constexpr size_t kMaxLines = 20;
  std::string text;
  for (size_t i = 0; i < lines_.size() && i < kMaxLines; ++i) text += StrCat(i ? "\n" : "", lines_[i]);
  if (lines_.size() > kMaxLines) text += StrCat("\n... and ", lines_.size() - kMaxLines, " more");
  return UsageError(std::move(text));
}

std::string FormatNumber(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  std::string s(buf, ec == std::errc() ? end : buf);
  // "5e-04" -> "5e-4": shorter, and still TOML.
  if (const size_t e = s.find('e'); e != std::string::npos) {
    size_t digits = e + 1;
    if (digits < s.size() && (s[digits] == '-' || s[digits] == '+')) ++digits;
    while (digits + 1 < s.size() && s[digits] == '0') s.erase(digits, 1);
  }
  return s;
}

std::string QuoteToml(std::string_view s) {
  std::string out = "\"";
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (ch) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += ch;
        }
    }
  }
  return out + "\"";
}

std::string FormatValue(const Value& value) {
  struct Visitor {
    std::string operator()(int64_t v) const { return std::to_string(v); }
    std::string operator()(double v) const {
      std::string s = FormatNumber(v);
      // A float must not read back as an integer.
      if (s.find_first_of(".eni") == std::string::npos) s += ".0";
      return s;
    }
    std::string operator()(bool v) const { return v ? "true" : "false"; }
    std::string operator()(const std::string& v) const { return QuoteToml(v); }
    std::string operator()(const std::vector<std::string>& v) const {
      std::string out = "[";
      for (size_t i = 0; i < v.size(); ++i) out += StrCat(i ? ", " : "", QuoteToml(v[i]));
      return out + "]";
    }
    std::string operator()(const std::vector<int64_t>& v) const {
      std::string out = "[";
      for (size_t i = 0; i < v.size(); ++i) out += StrCat(i ? ", " : "", v[i]);
      return out + "]";
    }
  };
  return std::visit(Visitor{}, value);
}

std::string DescribeAllowed(const Field& field) {
  const Constraint& c = field.constraint;
  if (!c.choices.empty()) return ChoicesText(c.choices);
  if (c.non_empty) return "non-empty";
  const auto num = [](double v) { return FormatNumber(v); };
  if (c.min && c.max && !c.min_exclusive && !c.max_exclusive) return StrCat(num(*c.min), " .. ", num(*c.max));
  std::string out;
  if (c.min) out = StrCat(c.min_exclusive ? "> " : ">= ", num(*c.min));
  if (c.max) out += StrCat(out.empty() ? "" : ", ", c.max_exclusive ? "< " : "<= ", num(*c.max));
  return out;
}

}  // namespace schema
}  // namespace tessel::jobs
