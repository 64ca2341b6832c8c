#include "orchestrator/run_output.h"

#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <filesystem>

#include "core/json.h"
#include "core/logging.h"

namespace tessel::orchestrator {

std::string RunDirPath(const jobs::JobSpec& spec) {
  std::string dir = spec.job.output_dir;
  if (dir.empty()) {
    std::time_t t = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
    dir = "runs/" + spec.job.name + "-" + stamp;
  }
  return dir;
}

Status CreateRunDir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return StorageError("cannot create the run directory " + dir + ": " + ec.message());
  return Status();
}

Result<std::string> MakeRunDir(const jobs::JobSpec& spec) {
  std::string dir = RunDirPath(spec);
  TESSEL_RETURN_IF_ERROR(CreateRunDir(dir));
  return dir;
}

Result<std::string> ResumeRunDir(const jobs::JobSpec& spec) {
  if (!spec.job.output_dir.empty() || !spec.checkpoint.dir.empty()) return RunDirPath(spec);
  // runs/<name>-YYYYmmdd-HHMMSS sorts by time.
  const std::string prefix = spec.job.name + "-";
  std::string newest;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("runs", ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) != 0 || name.size() != prefix.size() + 15) continue;
    if (!std::filesystem::is_directory(e.path() / "checkpoints", ec)) continue;
    newest = std::max(newest, name);
  }
  if (newest.empty()) {
    return UsageError("--resume: no earlier run of job '" + spec.job.name + "' with checkpoints under runs/ (looked for runs/" +
                      prefix + "*/checkpoints); set job.output_dir or checkpoint.dir to the run to resume");
  }
  return "runs/" + newest;
}

Status WriteSummary(const std::string& run_dir, const Record& summary) {
  return WriteFileAtomically(run_dir + "/summary.json", FormatJson(RecordJson(summary), JsonLayout::kIndented) + "\n");
}

}  // namespace tessel::orchestrator
