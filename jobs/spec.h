// The job file: its typed form (JobSpec), the parser and the validator.
//
// A job file is TOML with `version = 1` at the top (DESIGN.md "Job file"). The schema — every key's
// name, type, default, allowed values and one-line doc — is declared once, in the field table of
// jobs/schema.cc; that table drives parsing, unknown-key rejection, `--set` overrides, FormatJobToml()
// and DescribeFields(), and a test checks that jobs/README.md documents exactly its keys.
//
// Defaults live in the member initialisers below and nowhere else.
//
// Failure: every problem with a job file or an override is Code::kUsage (exit 2). Messages start
// with where the offending key came from — "FILE:LINE:COL: ..." for a key in the file, "FILE: ..."
// when a required key is absent, "--set k=v: ..." for an override — and several problems found in one
// pass are reported together, one per line.
//
// Thread safety: every function here is reentrant (no shared state); a JobSpec is a plain value.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "core/choices.h"
#include "core/record.h"
#include "core/status.h"

namespace tessel::jobs {

inline constexpr int kJobFileVersion = 1;
// The model an llm job trains (model.name).
inline constexpr std::string_view kGptModelName = "gpt2";

// The choices a job makes are the enums of core/choices.h, named in this namespace too. Their TOML
// spellings are their NamesOf() (NameOf(value) gives one); nothing else compares setting strings.
using tessel::BatchOrder;
using tessel::DataFormat;
using tessel::DeviceChoice;
using tessel::FanoutPer;
using tessel::FeatureGather;
using tessel::FeatureStoreChoice;
using tessel::HeadMerge;
using tessel::JobKind;
using tessel::LogLevel;
using tessel::ModelInput;
using tessel::OptimizerName;
using tessel::PartitionMethod;
using tessel::SpillPolicy;
using tessel::TrainMode;
using tessel::WeightInit;

struct JobSection {
  std::string name;               // required; letters, digits, '.', '_' and '-' only (it names the run directory)
  JobKind kind = JobKind::kRgnn;  // required in the file
  uint64_t seed = 0;
  DeviceChoice device = DeviceChoice::kAuto;
  double time_limit_seconds = 0;  // 0 = none
  std::string output_dir;         // "" = runs/<name>-<UTC timestamp>, resolved by the runner
  LogLevel log_level = LogLevel::kInfo;
  bool operator==(const JobSection&) const = default;
};

struct ResourcesSection {
  int32_t workers = 1;
  int32_t threads_per_worker = 1;
  int32_t gpus_per_worker = 0;
  int64_t memory_budget_bytes = 0;  // 0 = unlimited; the runner compares the planner's prediction
  bool operator==(const ResourcesSection&) const = default;
};

struct SyntheticSection {
  int64_t nodes = 20000;
  int32_t node_types = 3;
  int32_t relations = 6;
  int32_t classes = 4;
  double avg_degree = 8;
  int64_t feature_dim = 32;  // 0 = no features (the model then uses one-hot inputs)
  double train_fraction = 0.1;
  double test_fraction = 0.2;
  uint64_t seed = 1;
  bool operator==(const SyntheticSection&) const = default;
};

struct DataSection {
  DataFormat format = DataFormat::kSynthetic;  // required in the file
  // The input graph file for kGraph; for the other formats the cache written on first use and read on
  // later runs ("" = no cache: import or generate in memory every run).
  std::string graph;
  std::string triples, train_labels, test_labels;                // kRdf (labels are optional for kEdges)
  std::vector<std::string> edges;                                // kEdges
  std::string partitions;                                        // kPartitions: `tessel partition --out`
  bool add_inverse = true;                                       // importers add an inverse relation per relation
  bool add_self_loop = true;                                     // importers add a self-loop relation per node type
  FeatureStoreChoice feature_store = FeatureStoreChoice::kAuto;  // sampled training's feature rows
  FeatureGather feature_gather = FeatureGather::kAuto;           // and how a GPU worker reads them
  SampledStructure structure = SampledStructure::kAuto;          // and where its in-edges live
  // llm jobs:
  std::string text;                      // kText
  std::string train_tokens, val_tokens;  // kLlmc (val_tokens "" = the tail of train_tokens)
  double val_fraction =
      0.1;  // the tail of the tokens held out for validation (kText, kGeneratedText, kLlmc without val_tokens)
  int64_t generated_bytes = 1 << 20;  // kGeneratedText
  BatchOrder order = BatchOrder::kSequential;
  SyntheticSection synthetic;
  bool operator==(const DataSection&) const = default;
};

// A value of a model's own key (core/model_keys.h), as the job set it.
using ModelOption = std::variant<int64_t, double, bool, std::string>;

struct ModelSection {
  std::string name = "rgcn";  // an rgnn job: a registered RGNN model; an llm job: kGptModelName
  int32_t layers = 2;
  int32_t hidden = 16;
  ModelInput input = ModelInput::kAuto;
  int32_t num_bases = 0;                         // RGCN: 0 = a full weight matrix per relation
  int32_t num_blocks = 0;                        // RGCN: 0 = no block-diagonal decomposition
  int32_t heads = 1;                             // RGAT, HGT
  HeadMerge head_merge = HeadMerge::kConcat;     // RGAT hidden layers
  WeightInit weight_init = WeightInit::kGlorot;  // rgnn: how weights and biases are drawn
  bool compact = true;  // compact materialisation: once per unique (relation, node) pair, not per edge
  bool reorder = true;  // linear-operator reordering: weights after aggregation, W_r a_r precomputed
  // gpt2 (hidden is the residual width C, heads the attention heads):
  int32_t context = 256;     // positions (wpe rows); sequences are train.seq_len <= context long
  int32_t vocab_size = 256;  // 256 = bytes
  std::string init_from;     // an llm.c GPT-2 checkpoint or a Hugging Face directory; "" = job.seed
  // The keys a model declares for itself (core/model_keys.h) that the job sets to other than their
  // defaults, by key ("model.bias"); a key absent here has its default. Their defaults and rows are the
  // model's, not this file's.
  std::map<std::string, ModelOption, std::less<>> options;
  bool operator==(const ModelSection&) const = default;
};

struct TrainSection {
  TrainMode mode = TrainMode::kFull;
  int32_t epochs = 50;
  double lr = 0.01;
  double l2 = 5e-4;  // L2 on the first layer's parameters, as in the R-GCN paper
  OptimizerName optimizer = OptimizerName::kAdam;
  int32_t log_every = 1;  // epochs between progress lines
  // Sampled training (mode = kSampled):
  std::vector<int32_t> fanouts;  // per layer, input layer first; -1 = all; empty = FanoutsOf()'s default
  FanoutPer fanout_per = FanoutPer::kTotal;
  int32_t batch_size = 1024;          // training nodes per mini-batch, over all workers
  std::vector<int32_t> eval_fanouts;  // empty = every neighbour
  bool prefetch = true;
  HaloMode halo = HaloMode::kResident;  // full-graph training: how a worker holds its halo rows
  // llm jobs (batch_size is then the global batch in sequences):
  int32_t steps = 100;
  int32_t seq_len = 0;          // 0 = model.context
  int32_t microbatch_size = 0;  // sequences per micro-batch; 0 = batch_size / (microbatches x data_parallel)
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  double weight_decay = 0;  // decoupled (AdamW), on the 2-D parameters
  double grad_clip = 0;     // max global gradient norm; 0 = no clipping
  int32_t warmup_steps = 0;
  double final_lr_fraction = 1;            // cosine decay from lr to lr x this after warm-up; 1 = constant
  int32_t val_every = 0;                   // steps between validations; 0 = at the end only
  int32_t val_batches = 20;                // batches of batch_size sequences per validation; 0 = the whole split
  Precision precision = Precision::kFp32;  // activations and matmuls: fp32, or bf16 with f32 accumulation
  BadLossAction on_bad_loss = BadLossAction::kStop;
  double bad_loss_factor =
      10;  // a loss above this x the median of the last bad_loss_window steps (and above step 1's) has exploded
  int32_t bad_loss_window = 5;
  bool operator==(const TrainSection&) const = default;
};

struct PartitionSection {
  PartitionMethod method = PartitionMethod::kMetis;
  uint64_t seed = 0;
  bool operator==(const PartitionSection&) const = default;
};

struct PipelineSection {
  int32_t stages = 1;
  int32_t microbatches = 1;     // per step and pipeline (gradient accumulation)
  int32_t data_parallel = 1;    // replicas of the pipeline; stages x data_parallel = resources.workers
  std::vector<int32_t> layers;  // blocks per stage, first stage first; [] = the stage planner decides
  bool operator==(const PipelineSection&) const = default;
};

struct SpillSection {
  std::string dir;                          // "" = this user's /tmp/tessel-<uid>/spill (storage::SpillDirectory)
  int64_t budget_bytes = 0;                 // 0 = unlimited
  SpillPolicy policy = SpillPolicy::kKeep;  // offloading writes to the disk: asked for, never by default
  // llm: one entry per block (model.layers of them), each kKeep, kRecompute or kOffload; [] = every
  // block follows `policy`.
  std::vector<SpillPolicy> layer_policies;
  bool checksum = false;  // HDF5 Fletcher32 on every spilled tensor
  bool operator==(const SpillSection&) const = default;
};

struct CheckpointSection {
  std::string dir;          // "" = OUTPUT_DIR/checkpoints, resolved by the runner
  int32_t every_steps = 0;  // 0 = no checkpoints
  int32_t keep = 2;
  bool operator==(const CheckpointSection&) const = default;
};

struct PluginsSection {
  // Both empty: load the built-in plugins beside the executable. Otherwise load exactly these.
  std::vector<std::string> paths;
  std::vector<std::string> search_dirs;  // directories scanned for libtessel_*.so plugins
  std::vector<std::string> prefer;       // plugin names: which serves an op that several offer, first first
  bool operator==(const PluginsSection&) const = default;
};

struct MetricsSection {
  std::string bind = "127.0.0.1";
  int32_t port_base = 9400;  // rank r listens on port_base + r; 0 disables the exporter
  std::string targets_file;  // "" = OUTPUT_DIR/targets.json
  std::string pushgateway;   // "" = no push; else a Pushgateway URL
  double straggler_factor =
      1.5;  // a worker whose median step time over the window is this x the fastest's is a straggler
  int32_t straggler_window = 10;  // steps per straggler window
  int32_t kernel_sample_every =
      10;  // time every kernel call of steps 1, 1 + n, ... (tessel_kernel_seconds_total); 0 = never
  double final_scrape_seconds = 15;  // after a failure, the exporters stay up this long for a last scrape
  bool operator==(const MetricsSection&) const = default;
};

struct TimeoutsSection {
  double heartbeat_interval_seconds = 1.0;
  double heartbeat_timeout_seconds = 10.0;
  double startup_seconds = 120.0;
  double step_seconds = 600.0;
  bool operator==(const TimeoutsSection&) const = default;
};

// What `tessel smoke` (orchestrator/smoke.h) requires of each rank of an allocation; flags override them.
struct SmokeSection {
  double max_latency_us = 1000;     // point-to-point with rank 0, one way
  double min_bandwidth_mb_s = 100;  // point-to-point with rank 0, 4 MiB messages; MB = 1e6 bytes
  double max_allreduce_ms = 1000;   // a 1 MiB float allreduce over all ranks
  double min_spill_free_mb = 1024;  // free space in spill.dir
  double min_spill_mb_s = 50;       // spill.dir's write and read bandwidth
  int32_t min_gpus = 0;             // usable GPUs per rank (a job with job.device = "cuda": at least 1)
  double timeout_seconds = 30;      // for any one message; a rank that misses it FAILs
  bool operator==(const SmokeSection&) const = default;
};

struct JobSpec {
  int version = kJobFileVersion;
  std::string source_path;  // the file (or source name) it was parsed from
  JobSection job;
  ResourcesSection resources;
  DataSection data;
  ModelSection model;
  TrainSection train;
  PartitionSection partition;
  PipelineSection pipeline;
  SpillSection spill;
  CheckpointSection checkpoint;
  PluginsSection plugins;
  MetricsSection metrics;
  TimeoutsSection timeouts;
  SmokeSection smoke;

  // Where each key that was set came from: key path ("train.epochs", "data.edges[1]", or a section
  // name such as "data") -> "FILE:LINE:COL" or "--set k=v". Keys left at their default are absent.
  std::map<std::string, std::string, std::less<>> origins;
};

// Where `key` was set (see JobSpec::origins), or spec.source_path when it was left at its default.
std::string KeyOrigin(const JobSpec& spec, std::string_view key);

// Defaults derived from other settings, one named function each (a member initialiser cannot see them).
// train.fanouts as sampled training draws them: the job's, or kDefaultFanout per layer (model.layers).
inline constexpr int32_t kDefaultFanout = 10;
std::vector<int32_t> FanoutsOf(const JobSpec& spec);
// The keys of the model that `spec` trains (core/model_keys.h), each with the job's value or its default,
// as the record its workers read them from (ModelKey::Of).
Record ModelOptionsOf(const JobSpec& spec);

// The longest job.name: it is part of the run directory's name and of every spill file's, and a name must
// fit NAME_MAX (255) with what Tessel adds to it.
inline constexpr size_t kMaxJobNameLength = 128;

// The largest job file read (1 MiB): a job file is a page of TOML; anything larger is another file given by
// mistake, and is refused before it is read.
inline constexpr int64_t kMaxJobFileBytes = int64_t{1} << 20;

// Reads the file at `path` and parses it with ParseJob(). kUsage naming the file and the cause when it is
// unreadable, not a regular file (a directory, a FIFO, a device: never opened for reading, so a FIFO
// cannot block) or larger than kMaxJobFileBytes.
Result<JobSpec> LoadJobFile(const std::string& path, const std::vector<std::string>& overrides);

// Parses TOML text, applies the overrides ("key.path=value", in order, the last one winning) and runs
// ValidateJob(). `source_name` is used in messages and kept as JobSpec::source_path.
// An override's value is parsed as a TOML value (`3`, `0.02`, `"0.0.0.0"`, `["a", "b"]`); text that is
// not a TOML value is taken as a bare string (`runs/seed3`), and so is any value given to a string key.
// Overrides go through the same type and range checks as the file and may set keys the file lacks.
Result<JobSpec> ParseJob(std::string_view toml_text, const std::string& source_name,
                         const std::vector<std::string>& overrides);

// The rules that span fields (jobs/RULES.md). ParseJob() already calls it; call it
// again after changing a JobSpec by hand.
Status ValidateJob(const JobSpec& spec);

// Coordinator-only: checks that the input files of [data] exist and are readable regular files. Workers
// parse the job text but never read the data, so this is separate. kUsage naming the key's origin and
// the path. Relative paths are taken relative to the current working directory.
Status ValidateDataPaths(const JobSpec& spec);

// The resolved job as a TOML document that ParseJob() reads back to an equal JobSpec: every key of the
// field table, defaults included, grouped by section; an rgnn job's [pipeline], which ValidateJob()
// refuses, is left out (it can only hold its defaults). For RUN_DIR/job.toml and for sending to workers.
std::string FormatJobToml(const JobSpec& spec);

// The field table, for documentation and tooling (one entry per key, in table order).
struct FieldInfo {
  std::string key;            // "train.epochs"
  std::string type;           // "integer", "float", "boolean", "string", "array of strings", "bytes"
  std::string default_value;  // as TOML ("50", "\"adam\"", "[]"), or "required"
  std::string allowed;        // ">= 1", "> 0", "0 .. 65535", "\"adam\", \"sgd\"", or "" for any
  std::string doc;            // one line
};
std::vector<FieldInfo> DescribeFields();

// What a checkpoint records so that `tessel run --resume` can tell the same job from another one
// (jobs/README.md "[checkpoint]"): every key whose row in jobs/schema.cc is marked as changing the
// trajectory, in table order, as (key, value as TOML); a key that names input files (data.text,
// model.init_from, ...; data.graph only for format "graph", being otherwise the import cache) adds, per
// file, ("KEY file PATH", "N bytes, modified SECONDS.NANOSECONDS") or "missing". Reads only file metadata; relative
// paths are taken relative to the working directory.
std::vector<std::pair<std::string, std::string>> TrajectorySettings(const JobSpec& spec);
// The keys that TrajectorySettings leaves out (they change how a run goes, not what it computes), in
// table order, for documentation.
std::vector<std::string> RunOnlyKeys();

}  // namespace tessel::jobs
