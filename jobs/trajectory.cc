// The settings a checkpoint records (jobs/spec.h TrajectorySettings), derived from the field table's
// marking of each key (jobs/schema.h Effect) rather than from a list of its own.
#include <sys/stat.h>

#include <cstdio>

#include "core/logging.h"
#include "jobs/schema.h"
#include "jobs/spec.h"

namespace tessel::jobs {
namespace {

// Size and modification time: a changed or replaced file changes them (a hash would read every byte of
// a data set on every checkpoint).
std::string DescribeInputFile(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "missing";
  char stamp[48];
  std::snprintf(stamp, sizeof stamp, "%lld.%09ld", static_cast<long long>(st.st_mtim.tv_sec), st.st_mtim.tv_nsec);
  return StrCat(st.st_size, " bytes, modified ", stamp);
}

}  // namespace

std::vector<std::pair<std::string, std::string>> TrajectorySettings(const JobSpec& spec) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const schema::Field& f : schema::Fields()) {
    if (f.effect == schema::Effect::kRunOnly) continue;
    const schema::Value value = f.get(spec);
    out.emplace_back(std::string(f.key), schema::FormatValue(value));
    if (f.effect != schema::Effect::kInputFile) continue;
    // data.graph is the input only for format "graph"; otherwise it is the import cache, rebuilt from the
    // keys above (whose files count) whenever it is stale, so its modification time says nothing.
    if (f.key == "data.graph" && spec.data.format != DataFormat::kGraph) continue;
    std::vector<std::string> paths;
    if (const auto* one = std::get_if<std::string>(&value)) paths.push_back(*one);
    if (const auto* many = std::get_if<std::vector<std::string>>(&value)) paths = *many;
    for (std::string path : paths) {
      // A partitions directory is replaced whole by `tessel partition`, its manifest with it (the name
      // is storage::kPartitionManifestName; jobs does not depend on storage).
      if (f.key == "data.partitions" && !path.empty()) path += "/partition.json";
      // A Hugging Face directory (storage/hf_gpt2.h) is its two files.
      struct stat st {};
      if (f.key == "model.init_from" && ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
        for (const char* name : {"/config.json", "/model.safetensors"}) {
          out.emplace_back(StrCat(f.key, " file ", path, name), DescribeInputFile(path + name));
        }
        continue;
      }
      if (!path.empty()) out.emplace_back(StrCat(f.key, " file ", path), DescribeInputFile(path));
    }
  }
  return out;
}

std::vector<std::string> RunOnlyKeys() {
  std::vector<std::string> out;
  for (const schema::Field& f : schema::Fields()) {
    if (f.effect == schema::Effect::kRunOnly) out.emplace_back(f.key);
  }
  return out;
}

}  // namespace tessel::jobs
