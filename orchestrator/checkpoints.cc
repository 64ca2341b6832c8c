#include "orchestrator/checkpoints.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/json.h"
#include "orchestrator/run_output.h"

namespace tessel::orchestrator {
namespace {

namespace fs = std::filesystem;

constexpr const char* kFormat = "tessel-checkpoint";

// The steps of DIR/step-<k> directories, newest first.
std::vector<int64_t> StepsOnDisk(const std::string& dir) {
  std::vector<int64_t> steps;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (!e.is_directory(ec) || name.rfind("step-", 0) != 0) continue;
    const std::string digits = name.substr(5);
    if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 18) continue;
    steps.push_back(std::stoll(digits));
  }
  std::sort(steps.rbegin(), steps.rend());
  return steps;
}

Result<std::string> ReadSmallFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return StorageError(StrCat(path, ": cannot open"));
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Why checkpoint `step_dir` cannot be resumed ("" if it can); *workers gets the worker count it was
// written by.
std::string Verify(const std::string& step_dir, int64_t step, int32_t* workers) {
  const std::string manifest = step_dir + "/manifest.json";
  std::error_code ec;
  if (!fs::is_directory(step_dir, ec)) return "the directory is missing";
  auto text = ReadSmallFile(manifest);
  if (!text.ok()) return "no manifest.json (the run stopped while writing it)";
  auto doc = ParseJson(*text, manifest);
  if (!doc.ok()) return doc.status().message();
  // The member `key` of an object when it is an integer (the manifest's numbers all are), else null.
  auto integer = [](const Json& object, const char* key) -> const Json* {
    return object.contains(key) && object.at(key).is_number_integer() ? &object.at(key) : nullptr;
  };
  const Json& d = *doc;
  const Json* at = integer(d, "step");
  if (!d.contains("format") || d.at("format") != kFormat || at == nullptr || at->get<int64_t>() != step ||
      !d.contains("shards") || !d.at("shards").is_array()) {
    return manifest + " is not a Tessel checkpoint manifest of step " + std::to_string(step);
  }
  const Json& shards = d.at("shards");
  *workers = static_cast<int32_t>(shards.size());
  for (size_t w = 0; w < shards.size(); ++w) {
    const Json* bytes = integer(shards[w], "bytes");
    const Json* crc = integer(shards[w], "crc32");
    if (bytes == nullptr || crc == nullptr) return StrCat(manifest, ": shard ", w, " has no bytes/crc32");
    const std::string shard = storage::CheckpointShardPath(step_dir, static_cast<int32_t>(w));
    auto digest = storage::DigestFile(shard);
    if (!digest.ok()) return digest.status().message();
    if (digest->bytes != bytes->get<int64_t>()) {
      return StrCat(shard, " has ", digest->bytes, " bytes, the manifest says ", bytes->get<int64_t>());
    }
    if (digest->crc32 != crc->get<uint32_t>()) {
      return StrCat(shard, ": CRC-32 ", digest->crc32, " differs from the manifest's ", crc->get<uint32_t>(),
                    " (damaged on disk)");
    }
  }
  return "";
}

}  // namespace

Status CommitCheckpoint(const std::string& dir, const std::string& job, int64_t step,
                        const std::vector<storage::FileDigest>& shards, int32_t keep, const Logger& log) {
  const std::string step_dir = storage::CheckpointStepDir(dir, step);
  Json manifest = {{"format", kFormat}, {"version", 1}, {"job", job}, {"step", step}, {"shards", Json::array()}};
  for (size_t i = 0; i < shards.size(); ++i) {
    manifest["shards"].push_back(
        {{"file", fs::path(storage::CheckpointShardPath(step_dir, static_cast<int32_t>(i))).filename().string()},
         {"bytes", shards[i].bytes},
         {"crc32", shards[i].crc32}});
  }
  TESSEL_RETURN_IF_ERROR(
      WriteFileAtomically(step_dir + "/manifest.json", FormatJson(manifest, JsonLayout::kIndented) + "\n"));
  TESSEL_RETURN_IF_ERROR(WriteFileAtomically(dir + "/latest", StrCat("step-", step, "\n")));
  log.Info(StrCat("checkpoint of step ", step, ": ", step_dir));
  // Keep the newest `keep` complete checkpoints; anything older goes, complete or not.
  int32_t kept = 0;
  for (int64_t s : StepsOnDisk(dir)) {
    const std::string d = storage::CheckpointStepDir(dir, s);
    if (s > step) continue;  // not ours to judge (a later run's)
    std::error_code ec;
    if (kept < keep && fs::exists(d + "/manifest.json", ec)) {
      ++kept;
      continue;
    }
    if (s == step) continue;
    fs::remove_all(d, ec);
    if (ec) log.Warn(StrCat("could not remove the old checkpoint ", d, ": ", ec.message()));
  }
  return Status();
}

Result<ResumePoint> FindResumePoint(const std::string& dir, int32_t workers, const Logger& log) {
  std::vector<int64_t> candidates;
  int64_t latest = -1;
  if (auto text = ReadSmallFile(dir + "/latest"); text.ok()) {
    std::string name = *text;
    while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) name.pop_back();
    const std::string digits = name.rfind("step-", 0) == 0 ? name.substr(5) : "";
    if (!digits.empty() && digits.size() <= 18 && digits.find_first_not_of("0123456789") == std::string::npos) {
      latest = std::stoll(digits);
      candidates.push_back(latest);
    } else {
      log.Warn(StrCat(dir, "/latest is damaged ('", name, "'); looking for the newest checkpoint that verifies"));
    }
  }
  for (int64_t s : StepsOnDisk(dir)) {
    if (s != latest) candidates.push_back(s);
  }
  std::string refused;
  for (int64_t s : candidates) {
    const std::string step_dir = storage::CheckpointStepDir(dir, s);
    int32_t written_by = 0;
    const std::string why = Verify(step_dir, s, &written_by);
    if (why.empty()) {
      if (written_by != workers) {
        return UsageError(StrCat("--resume: ", step_dir, " was written by ", written_by, " workers; this run has ",
                                 workers, " (resume with the same resources.workers and pipeline)"));
      }
      if (!refused.empty()) log.Warn(StrCat("resuming from the older checkpoint ", step_dir, " (step ", s, ")"));
      return ResumePoint{step_dir, s};
    }
    log.Warn(StrCat("checkpoint ", step_dir, " cannot be resumed: ", why));
    refused += StrCat("; step-", s, ": ", why);
  }
  return UsageError(StrCat("--resume: no checkpoint to resume in ", dir,
                           refused.empty() ? " (none was written: is checkpoint.every_steps > 0?)" : refused));
}

}  // namespace tessel::orchestrator
