#include "orchestrator/run_output.h"

#include <unistd.h>

#include <ctime>
#include <filesystem>
#include <fstream>

#include "core/json_writer.h"
#include "core/logging.h"
#include "core/version.h"

namespace tessel::orchestrator {

Result<std::string> MakeRunDir(const jobs::JobSpec& spec) {
  std::string dir = spec.job.output_dir;
  if (dir.empty()) {
    std::time_t t = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
    dir = "runs/" + spec.job.name + "-" + stamp;
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return StorageError("cannot create the run directory " + dir + ": " + ec.message());
  return dir;
}

Status WriteFileAtomically(const std::string& path, const std::string& contents) {
  const std::string tmp = path + ".tmp-" + std::to_string(getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << contents;
    out.flush();
    if (!out) {
      std::error_code ec;
      std::filesystem::remove(tmp, ec);
      return StorageError("cannot write " + path);
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    return StorageError("cannot rename " + tmp + " to " + path + ": " + ec.message());
  }
  return Status();
}

Status WriteSummary(const std::string& run_dir, const jobs::JobSpec& spec, const storage::HeteroGraph& graph,
                    const JobPlan& plan, const workers::ResultMsg& r, double wall_seconds) {
  JsonWriter w;
  w.BeginObject();
  w.Field("job", spec.job.name);
  w.Field("kind", jobs::KindName(spec.job.kind));
  w.Field("model", spec.model.name);
  w.Field("workers", plan.num_workers);
  w.Field("seed", static_cast<int64_t>(spec.job.seed));
  w.Field("wall_seconds", wall_seconds);
  w.Field("epoch_loss", r.epoch_loss);
  w.Field("epoch_seconds", r.epoch_seconds);
  w.Field("train_accuracy", r.train_accuracy);
  w.Field("test_accuracy", r.test_accuracy);
  w.Field("test_correct", r.test_correct);
  w.Field("test_total", r.test_total);
  w.Field("peak_worker_rss_bytes", r.peak_rss_bytes);
  w.Field("halo_bytes_sent", r.halo_bytes_sent);
  w.Key("graph").BeginObject();
  w.Field("name", graph.name).Field("nodes", graph.num_nodes()).Field("edges", graph.num_edges());
  w.Field("relations", static_cast<int64_t>(graph.relations.size())).Field("classes", graph.num_classes);
  w.EndObject();
  w.Key("partition").BeginObject();
  w.Field("method", plan.partition.method).Field("edge_cut", plan.partition.edge_cut);
  w.Field("seconds", plan.partition.seconds);
  w.Key("imbalance").BeginObject();
  for (size_t i = 0; i < plan.partition.constraint_names.size(); ++i) {
    w.Field(plan.partition.constraint_names[i], plan.partition.imbalance[i]);
  }
  w.EndObject().EndObject();
  w.Field("version", kTesselVersion);
  w.EndObject();
  return WriteFileAtomically(run_dir + "/summary.json", w.str() + "\n");
}

}  // namespace tessel::orchestrator
