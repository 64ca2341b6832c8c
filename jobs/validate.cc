// The rules that span fields (jobs/RULES.md) and the coordinator's check of the
// input files. Each message starts with the origin of the key at fault (see KeyOrigin()).
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>

#include "core/logging.h"
#include "core/model_keys.h"
#include "jobs/schema.h"
#include "jobs/spec.h"

namespace tessel::jobs {
namespace {

using schema::ErrorList;

bool IsRunName(std::string_view name) {
  if (name.empty() || !std::isalnum(static_cast<unsigned char>(name.front()))) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
  });
}

// A key that a data format needs. Reported like a missing required key, at the [data] section when
// the file has one, else where data.format was set.
void Require(const JobSpec& spec, bool present, std::string_view key, std::string_view what, ErrorList* errors) {
  if (present) return;
  const bool has_section = spec.origins.contains("data");
  errors->Add(KeyOrigin(spec, has_section ? "data" : "data.format"),
              StrCat("missing required key '", key, "' (", what,
                     "): data.format = ", schema::QuoteToml(NameOf(spec.data.format)), " needs it"));
}

void CheckDataSection(const JobSpec& spec, ErrorList* errors) {
  const DataSection& d = spec.data;
  switch (d.format) {
    case DataFormat::kGraph:
      Require(spec, !d.graph.empty(), "data.graph", "the .h5 graph file", errors);
      break;
    case DataFormat::kRdf:
      Require(spec, !d.triples.empty(), "data.triples", "the N-Triples file", errors);
      Require(spec, !d.train_labels.empty(), "data.train_labels", "the training labels TSV", errors);
      Require(spec, !d.test_labels.empty(), "data.test_labels", "the test labels TSV", errors);
      break;
    case DataFormat::kEdges:
      Require(spec, !d.edges.empty(), "data.edges", "at least one edge-list file", errors);
      break;
    case DataFormat::kPartitions:
      Require(spec, !d.partitions.empty(), "data.partitions", "the directory `tessel partition --out` wrote", errors);
      break;
    case DataFormat::kText:
      Require(spec, !d.text.empty(), "data.text", "the text file", errors);
      break;
    case DataFormat::kLlmc:
      Require(spec, !d.train_tokens.empty(), "data.train_tokens", "the llm.c token file", errors);
      break;
    case DataFormat::kGeneratedText:
      break;
    case DataFormat::kSynthetic: {
      const SyntheticSection& s = d.synthetic;
      if (s.nodes < s.node_types) {
        errors->Add(KeyOrigin(spec, "data.synthetic.nodes"),
                    StrCat("data.synthetic.nodes = ", s.nodes, " must be >= data.synthetic.node_types = ", s.node_types,
                           " (every node type needs a node)"));
      }
      if (s.train_fraction + s.test_fraction > 1) {
        errors->Add(KeyOrigin(spec, "data.synthetic.test_fraction"),
                    StrCat("data.synthetic.train_fraction + test_fraction = ",
                           schema::FormatNumber(s.train_fraction + s.test_fraction), " must be <= 1"));
      }
      if (s.feature_dim == 0 && spec.model.input == ModelInput::kFeatures) {
        errors->Add(KeyOrigin(spec, "model.input"),
                    "model.input = \"features\" needs node features, but data.synthetic.feature_dim = 0");
      }
      break;
    }
  }
}

// `key` names the value in the message ("data.edges[1]"); its origin is looked up under `key`, falling back
// to `origin_key`.
void CheckReadableFile(const JobSpec& spec, const std::string& key, const std::string& path, ErrorList* errors,
                       std::string_view origin_key = "") {
  struct stat st;
  std::string problem;
  if (::stat(path.c_str(), &st) != 0) {
    problem = std::strerror(errno);
  } else if (S_ISDIR(st.st_mode)) {
    problem = "it is a directory, not a file";
  } else if (::access(path.c_str(), R_OK) != 0) {
    problem = std::strerror(errno);
  } else {
    return;
  }
  std::string hint;
  if (!path.empty() && path.front() != '/') {
    std::error_code ec;
    const auto cwd = std::filesystem::current_path(ec);
    hint = StrCat(" (a relative path is taken from the current directory, ", ec ? "?" : cwd.string(), ")");
  }
  const bool own_origin = spec.origins.contains(key) || origin_key.empty();
  errors->Add(KeyOrigin(spec, own_origin ? std::string_view(key) : origin_key),
              StrCat(key, ": cannot read ", schema::QuoteToml(path), ": ", problem, hint));
}

// The rules of an rgnn job (jobs/RULES.md rules 2, 3, 9 and 10).
// A key one model declares (core/model_keys.h) means nothing to another: set to other than its default in a
// job that trains another model, it is refused rather than ignored. (job.toml writes every key with its
// value, so a key at its default is a key left alone: JobSpec holds only the others.)
void CheckModelKeys(const JobSpec& spec, ErrorList* errors) {
  for (const RegisteredModelKey& r : SealModelKeys()) {
    if (r.model == spec.model.name || !spec.model.options.contains(r.key->key)) continue;
    const schema::Field* row = schema::FindField(r.key->key);
    const schema::Value value = row->get(spec), unset = row->get(JobSpec{});
    errors->Add(KeyOrigin(spec, r.key->key),
                StrCat(r.key->key, " = ", schema::FormatValue(value), " is a key of model.name = \"", r.model,
                       "\", and this job trains \"", spec.model.name, "\"; leave it out or set it to its default, ",
                       schema::FormatValue(unset)));
  }
}

void CheckRgnn(const JobSpec& spec, ErrorList* errors) {
  const auto at = [&spec](std::string_view key) { return KeyOrigin(spec, key); };
  const auto at_either = [&spec](std::string_view first, std::string_view second) {
    return KeyOrigin(spec, spec.origins.contains(first) ? first : second);
  };
  for (const auto& [key, origin] : spec.origins) {
    if (key == "pipeline" || key.starts_with("pipeline.")) {
      errors->Add(origin, "[pipeline] is for job.kind = \"llm\"; an rgnn job is split across workers by [partition]");
      break;
    }
  }
  if (spec.model.name == kGptModelName) {
    errors->Add(
        at("model.name"),
        "model.name = \"gpt2\" is an llm model; an rgnn job trains an RGNN model (\"rgcn\", \"rgat\", \"hgt\", ...)");
  }
  switch (spec.data.format) {
    case DataFormat::kText:
    case DataFormat::kLlmc:
    case DataFormat::kGeneratedText:
      errors->Add(at("data.format"), StrCat("data.format = ", schema::QuoteToml(NameOf(spec.data.format)),
                                            " holds tokens for an llm job; an rgnn job reads a graph"));
      break;
    default:
      break;
  }
  // Settings the schema knows but this build cannot honour yet: refused, never silently ignored.
  const auto not_yet = [&](std::string_view key, const std::string& value, std::string_view instead) {
    errors->Add(at(key), StrCat(key, " = ", value, " is not supported by this build yet; ", instead));
  };
  const TrainSection& train = spec.train;
  for (const auto& [key, fanouts] :
       {std::pair<std::string_view, const std::vector<int32_t>*>{"train.fanouts", &train.fanouts},
        {"train.eval_fanouts", &train.eval_fanouts}}) {
    for (size_t i = 0; i < fanouts->size(); ++i) {
      const int32_t f = (*fanouts)[i];
      if (f == 0 || f < -1) {
        errors->Add(at(key), StrCat(key, "[", i, "] = ", f, ": a fanout is >= 1, or -1 for every neighbour"));
      }
    }
  }
  if (train.mode == TrainMode::kSampled && spec.data.format == DataFormat::kPartitions) {
    // The part files are the only copy of the graph any rank reads: each worker samples from its own.
    if (spec.data.structure == SampledStructure::kReplicated) {
      errors->Add(at_either("data.structure", "data.format"),
                  "data.structure = \"replicated\" puts the whole graph on every worker, but with data.format = "
                  "\"partitions\" each worker reads only its part; use \"partitioned\" (or \"auto\"), or "
                  "data.format = \"graph\" where the graph fits one machine");
    }
    if (spec.data.feature_store != FeatureStoreChoice::kAuto) {
      errors->Add(at_either("data.feature_store", "data.format"),
                  StrCat("data.feature_store = \"", NameOf(spec.data.feature_store),
                         "\" reads the graph file, but with data.format = \"partitions\" a worker's feature rows "
                         "come from its part file; leave it \"auto\""));
    }
  }
  if (train.mode == TrainMode::kSampled && train.halo == HaloMode::kStreamed) {
    errors->Add(at_either("train.halo", "train.mode"),
                "train.halo = \"streamed\" is how full-graph training holds its halo rows; sampled training "
                "fetches each batch's rows and keeps no halo: leave it \"resident\"");
  }
  if (train.mode == TrainMode::kSampled) {
    if (!train.fanouts.empty() && static_cast<int32_t>(train.fanouts.size()) != spec.model.layers) {
      errors->Add(at_either("train.fanouts", "model.layers"),
                  StrCat("train.fanouts has ", train.fanouts.size(), " entries but model.layers = ", spec.model.layers,
                         ": give one fanout per layer (input layer first), or [] for ", kDefaultFanout, " per layer"));
    }
    if (!train.eval_fanouts.empty() && static_cast<int32_t>(train.eval_fanouts.size()) != spec.model.layers) {
      errors->Add(at_either("train.eval_fanouts", "model.layers"),
                  StrCat("train.eval_fanouts has ", train.eval_fanouts.size(), " entries but model.layers = ",
                         spec.model.layers, ": give one per layer, or [] for every neighbour"));
    }
  }
  if (spec.train.optimizer != OptimizerName::kAdam) {
    not_yet("train.optimizer", schema::QuoteToml(NameOf(spec.train.optimizer)), "use \"adam\"");
  }
  // fp64 is full-graph training on one CPU worker (the halo exchange, the gradient sum and the sampled
  // feature gather move f32); bf16 is an llm job's.
  switch (train.precision) {
    case Precision::kFp32:
      break;
    case Precision::kBf16:
      errors->Add(at("train.precision"),
                  "train.precision = \"bf16\" is for llm jobs; an rgnn job trains in "
                  "\"fp32\" or \"fp64\"");
      break;
    case Precision::kFp64:
      if (train.mode == TrainMode::kSampled) {
        errors->Add(at_either("train.precision", "train.mode"),
                    "train.precision = \"fp64\" is for full-graph training in this build (train.mode = \"full\")");
      }
      if (spec.resources.workers > 1) {
        errors->Add(at_either("train.precision", "resources.workers"),
                    StrCat("train.precision = \"fp64\" trains on one worker in this build, but resources.workers = ",
                           spec.resources.workers));
      }
      break;
  }
  // The rules of one model (heads, weight decompositions) are the model's own: the graph planner checks
  // them (workers/rgnn/model.h, RgnnModel::Check), and `tessel validate` runs it.
}

// The rules of an llm job (jobs/RULES.md rule 11).
void CheckLlm(const JobSpec& spec, ErrorList* errors) {
  const auto at = [&spec](std::string_view key) { return KeyOrigin(spec, key); };
  const auto at_either = [&spec](std::string_view first, std::string_view second) {
    return KeyOrigin(spec, spec.origins.contains(first) ? first : second);
  };
  const ModelSection& m = spec.model;
  const TrainSection& t = spec.train;
  const PipelineSection& p = spec.pipeline;
  if (m.name != kGptModelName) {
    errors->Add(at("model.name"), StrCat("model.name = ", schema::QuoteToml(m.name),
                                         " is an rgnn model; an llm job trains model.name = \"gpt2\""));
  }
  switch (spec.data.format) {
    case DataFormat::kText:
    case DataFormat::kLlmc:
    case DataFormat::kGeneratedText:
      break;
    default:
      errors->Add(at("data.format"), StrCat("data.format = ", schema::QuoteToml(NameOf(spec.data.format)),
                                            " is a graph; an llm job reads \"text\", \"llmc\" or \"generated_text\""));
  }
  if ((spec.data.format == DataFormat::kText || spec.data.format == DataFormat::kGeneratedText) && m.vocab_size < 256) {
    errors->Add(at_either("model.vocab_size", "data.format"),
                StrCat("model.vocab_size = ", m.vocab_size, ": data.format = ",
                       schema::QuoteToml(NameOf(spec.data.format)), " has byte tokens 0..255; use >= 256"));
  }
  if (m.hidden % m.heads != 0) {
    errors->Add(at_either("model.heads", "model.hidden"),
                StrCat("model.hidden = ", m.hidden, " is not divisible by model.heads = ", m.heads,
                       ": gpt2 splits the width across the heads"));
  }
  if (t.precision == Precision::kFp64) {
    errors->Add(at("train.precision"),
                "train.precision = \"fp64\" is for rgnn jobs; an llm job trains in \"fp32\" or \"bf16\"");
  }
  if (t.seq_len > m.context) {
    errors->Add(at_either("train.seq_len", "model.context"),
                StrCat("train.seq_len = ", t.seq_len, " is longer than model.context = ", m.context, " positions"));
  }
  if (t.optimizer != OptimizerName::kAdamw) {
    errors->Add(at("train.optimizer"), StrCat("train.optimizer = ", schema::QuoteToml(NameOf(t.optimizer)),
                                              ": an llm job trains with \"adamw\""));
  }
  if (t.warmup_steps > t.steps) {
    errors->Add(at_either("train.warmup_steps", "train.steps"),
                StrCat("train.warmup_steps = ", t.warmup_steps, " is more than train.steps = ", t.steps));
  }
  const int64_t workers = spec.resources.workers;
  const int64_t replicas = int64_t{p.stages} * p.data_parallel;
  if (replicas != workers) {
    errors->Add(at_either("pipeline.stages", "resources.workers"),
                StrCat("pipeline.stages x pipeline.data_parallel = ", p.stages, " x ", p.data_parallel, " = ", replicas,
                       " but resources.workers = ", workers, ": each worker runs one stage of one replica",
                       p.stages > workers ? " (more stages than workers)" : ""));
  }
  if (p.stages > m.layers) {
    errors->Add(at_either("pipeline.stages", "model.layers"),
                StrCat("pipeline.stages = ", p.stages, " is more than model.layers = ", m.layers,
                       ": every stage holds at least one block"));
  }
  if (!p.layers.empty()) {
    int64_t sum = 0;
    bool positive = true;
    for (int32_t n : p.layers) {
      sum += n;
      positive = positive && n >= 1;
    }
    if (static_cast<int64_t>(p.layers.size()) != p.stages || sum != m.layers || !positive) {
      errors->Add(at("pipeline.layers"), StrCat("pipeline.layers has ", p.layers.size(), " entries summing to ", sum,
                                                ": give pipeline.stages = ", p.stages,
                                                " entries, each >= 1, summing to model.layers = ", m.layers,
                                                " (or [] to let the planner split)"));
    }
  }
  const std::vector<SpillPolicy>& policies = spec.spill.layer_policies;
  if (!policies.empty() && static_cast<int64_t>(policies.size()) != m.layers) {
    errors->Add(at_either("spill.layer_policies", "model.layers"),
                StrCat("spill.layer_policies has ", policies.size(), " entries but model.layers = ", m.layers,
                       ": give one policy per block, first block first (or [] for spill.policy on every block)"));
  }
  // microbatch x accumulation (micro-batches) x data-parallel = global batch.
  const int64_t per_step = int64_t{p.microbatches} * p.data_parallel;
  if (t.microbatch_size > 0) {
    if (int64_t{t.microbatch_size} * per_step != t.batch_size) {
      errors->Add(at_either("train.microbatch_size", "train.batch_size"),
                  StrCat("train.microbatch_size x pipeline.microbatches x pipeline.data_parallel = ", t.microbatch_size,
                         " x ", p.microbatches, " x ", p.data_parallel, " = ", t.microbatch_size * per_step,
                         " but train.batch_size = ", t.batch_size, " (the global batch, in sequences)"));
    }
  } else if (t.batch_size % per_step != 0) {
    errors->Add(at_either("train.batch_size", "pipeline.microbatches"),
                StrCat("train.batch_size = ", t.batch_size,
                       " is not divisible by pipeline.microbatches x "
                       "pipeline.data_parallel = ",
                       per_step, ": every micro-batch has the same number of sequences"));
  }
}

// Room for what Tessel writes inside a directory it is given, beyond the job name (which some names
// repeat): checkpoint.dir/step-K.refused/worker-W.h5.tmp-PID-N, RUN_DIR/checkpoints/..., SPILL_DIR/NAME-wK.PID.spill.h5
// and their temporaries. A path that leaves less fails at the first checkpoint or spill, after training.
constexpr size_t kRoomForNames = 160;

// The absolute path of directory `dir` (the key `key`) must leave room for the names written in it within
// PATH_MAX, and each of its components fit NAME_MAX.
void CheckPathRoom(const JobSpec& spec, std::string_view key, const std::string& dir, ErrorList* errors) {
  if (dir.empty()) return;
  std::error_code ec;
  std::filesystem::path abs = std::filesystem::absolute(dir, ec);
  if (ec) abs = dir;
  const std::string path = abs.lexically_normal().string();
  for (const auto& part : abs) {
    if (const size_t n = part.string().size(); n > NAME_MAX) {
      errors->Add(KeyOrigin(spec, key), StrCat(key, ": a component of the path is ", n,
                                               " characters, over the system's "
                                               "limit of ",
                                               NAME_MAX, " (NAME_MAX) for one name"));
      return;
    }
  }
  const size_t room = kRoomForNames + spec.job.name.size();
  if (path.size() + room >= PATH_MAX) {
    errors->Add(KeyOrigin(spec, key), StrCat(key, ": the path is ", path.size(),
                                             " characters (absolute); with the names Tessel writes in it (up to ", room,
                                             " more) it would pass the system's limit of ", PATH_MAX,
                                             " (PATH_MAX): choose a shorter directory"));
  }
}

}  // namespace

Status ValidateJob(const JobSpec& spec) {
  const auto at = [&spec](std::string_view key) { return KeyOrigin(spec, key); };
  // A rule between two keys is reported where the first was set, else where the second was.
  const auto at_either = [&spec](std::string_view first, std::string_view second) {
    return KeyOrigin(spec, spec.origins.contains(first) ? first : second);
  };
  if (spec.version != kJobFileVersion) {
    return UsageError(StrCat(spec.source_path, ": version = ", spec.version,
                             " is not supported; this build reads job files of version ", kJobFileVersion));
  }
  ErrorList errors;
  for (const schema::Field& f : schema::Fields()) {
    if (std::string problem = schema::CheckConstraint(f, f.get(spec)); !problem.empty()) {
      errors.Add(at(f.key), StrCat(f.key, ": ", problem));
    }
  }
  // The rules below assume every value is in its own range.
  if (!errors.empty()) return errors.ToStatus();
  if (!IsRunName(spec.job.name)) {
    errors.Add(at("job.name"), StrCat("job.name = ", schema::QuoteToml(spec.job.name),
                                      ": use letters, digits, '.', '_' and '-', starting with a letter or digit "
                                      "(it names the run directory)"));
  }
  CheckModelKeys(spec, &errors);
  if (spec.job.kind == JobKind::kLlm) {
    CheckLlm(spec, &errors);
  } else {
    CheckRgnn(spec, &errors);
  }
  if (!spec.metrics.pushgateway.empty()) {
    errors.Add(at("metrics.pushgateway"),
               StrCat("metrics.pushgateway = ", schema::QuoteToml(spec.metrics.pushgateway),
                      " is not supported by this build yet; let Prometheus scrape the ranks"));
  }
  if (spec.resources.gpus_per_worker > 0 && spec.job.device == DeviceChoice::kCpu) {
    errors.Add(at_either("resources.gpus_per_worker", "job.device"),
               StrCat("resources.gpus_per_worker = ", spec.resources.gpus_per_worker,
                      " needs job.device = \"auto\" or \"cuda\", but job.device = \"cpu\" (", at("job.device"), ")"));
  }
  const TimeoutsSection& t = spec.timeouts;
  if (!(t.heartbeat_timeout_seconds > 2 * t.heartbeat_interval_seconds)) {
    errors.Add(at_either("timeouts.heartbeat_timeout_seconds", "timeouts.heartbeat_interval_seconds"),
               StrCat("timeouts.heartbeat_timeout_seconds = ", schema::FormatNumber(t.heartbeat_timeout_seconds),
                      " must be more than 2 x timeouts.heartbeat_interval_seconds = ",
                      schema::FormatNumber(t.heartbeat_interval_seconds), ", so one late heartbeat is not a failure"));
  }
  const int64_t last_port = int64_t{spec.metrics.port_base} + spec.resources.workers;
  if (spec.metrics.port_base != 0 && last_port > 65535) {
    errors.Add(at_either("metrics.port_base", "resources.workers"),
               StrCat("metrics.port_base = ", spec.metrics.port_base, " + resources.workers = ", spec.resources.workers,
                      " is ", last_port, ", past the last port 65535 (rank r listens on port_base + r)"));
  }
  if (spec.job.name.size() > kMaxJobNameLength) {
    errors.Add(at("job.name"), StrCat("job.name is ", spec.job.name.size(), " characters; at most ", kMaxJobNameLength,
                                      " (it names the run directory and the spill files)"));
  }
  CheckPathRoom(spec, "job.output_dir", spec.job.output_dir, &errors);
  CheckPathRoom(spec, "checkpoint.dir", spec.checkpoint.dir, &errors);
  CheckPathRoom(spec, "spill.dir", spec.spill.dir, &errors);
  CheckDataSection(spec, &errors);
  return errors.ToStatus();
}

Status ValidateDataPaths(const JobSpec& spec) {
  const DataSection& d = spec.data;
  ErrorList errors;
  switch (d.format) {
    case DataFormat::kGraph:
      CheckReadableFile(spec, "data.graph", d.graph, &errors);
      break;
    case DataFormat::kRdf:
      CheckReadableFile(spec, "data.triples", d.triples, &errors);
      CheckReadableFile(spec, "data.train_labels", d.train_labels, &errors);
      CheckReadableFile(spec, "data.test_labels", d.test_labels, &errors);
      break;
    case DataFormat::kEdges:
      for (size_t i = 0; i < d.edges.size(); ++i) {
        CheckReadableFile(spec, StrCat("data.edges[", i, "]"), d.edges[i], &errors, "data.edges");
      }
      break;
    case DataFormat::kPartitions:  // the manifest (storage/partition_manifest.h); the workers check their parts
      CheckReadableFile(spec, "data.partitions", (std::filesystem::path(d.partitions) / "partition.json").string(),
                        &errors);
      break;
    case DataFormat::kText:
      CheckReadableFile(spec, "data.text", d.text, &errors);
      break;
    case DataFormat::kLlmc:
      CheckReadableFile(spec, "data.train_tokens", d.train_tokens, &errors);
      if (!d.val_tokens.empty()) CheckReadableFile(spec, "data.val_tokens", d.val_tokens, &errors);
      break;
    case DataFormat::kSynthetic:
    case DataFormat::kGeneratedText:
      break;
  }
  if (!spec.model.init_from.empty()) {
    // A Hugging Face directory (storage/hf_gpt2.h; jobs does not depend on storage) or an llm.c file.
    std::error_code ec;
    const std::filesystem::path from(spec.model.init_from);
    if (std::filesystem::is_directory(from, ec)) {
      for (const char* name : {"config.json", "model.safetensors"}) {
        CheckReadableFile(spec, "model.init_from", (from / name).string(), &errors);
      }
    } else {
      CheckReadableFile(spec, "model.init_from", spec.model.init_from, &errors);
    }
  }
  return errors.ToStatus();
}

}  // namespace tessel::jobs
