#include "orchestrator/checkpoints.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "core/json.h"
#include "core/safe_file.h"

namespace tessel::orchestrator {
namespace {

namespace fs = std::filesystem;

constexpr const char* kFormat = "tessel-checkpoint";
constexpr const char* kClaimFile = "job";

// A checkpoint directory's entry: DIR/step-<k>, or DIR/step-<k>.refused[.<n>] (set aside by a resume).
struct StepEntry {
  std::string name;
  int64_t step = 0;
  bool refused = false;
};

bool AllDigits(std::string_view s) {
  return !s.empty() && s.size() <= 18 && s.find_first_not_of("0123456789") == std::string_view::npos;
}

std::optional<StepEntry> ParseStepName(const std::string& name) {
  if (name.rfind("step-", 0) != 0) return std::nullopt;
  const std::string rest = name.substr(5);
  const size_t dot = rest.find('.');
  const std::string digits = rest.substr(0, dot);
  if (!AllDigits(digits)) return std::nullopt;
  StepEntry e{name, std::stoll(digits), false};
  if (dot == std::string::npos) return e;
  const std::string tail = rest.substr(dot);  // ".refused" or ".refused.<n>"
  if (tail != ".refused" && !(tail.rfind(".refused.", 0) == 0 && AllDigits(tail.substr(9)))) return std::nullopt;
  e.refused = true;
  return e;
}

// The step directories under `dir` (real directories, never links), newest step first.
std::vector<StepEntry> StepEntries(const std::string& dir) {
  std::vector<StepEntry> out;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    if (!fs::is_directory(e.symlink_status(ec))) continue;
    if (auto parsed = ParseStepName(e.path().filename().string())) out.push_back(*parsed);
  }
  std::sort(out.begin(), out.end(), [](const StepEntry& a, const StepEntry& b) {
    return a.step != b.step ? a.step > b.step : a.name < b.name;
  });
  return out;
}

Result<std::string> ReadSmallFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return StorageError(StrCat(path, ": cannot open"));
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string Trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  return s;
}

// The job named by STEP_DIR/manifest.json; nullopt when there is no readable manifest with a job.
std::optional<std::string> ManifestJob(const std::string& step_dir) {
  auto text = ReadSmallFile(step_dir + "/manifest.json");
  if (!text.ok()) return std::nullopt;
  auto doc = ParseJson(*text, step_dir);
  if (!doc.ok() || !doc->contains("job") || !doc->at("job").is_string()) return std::nullopt;
  return doc->at("job").get<std::string>();
}

// The names Tessel writes into a step directory: manifest.json, worker-<w>.h5, and their temporaries.
bool IsTesselStepFile(const std::string& name) {
  const std::string base = name.substr(0, name.find(".tmp-"));
  if (base == "manifest.json") return true;
  return base.rfind("worker-", 0) == 0 && base.size() > 10 && base.compare(base.size() - 3, 3, ".h5") == 0 &&
         AllDigits(std::string_view(base).substr(7, base.size() - 10));
}

// The first entry of `step_dir` that Tessel did not write there ("" when there is none): only such a
// directory may be pruned.
std::string FirstStranger(const std::string& step_dir) {
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(step_dir, ec)) {
    const std::string name = e.path().filename().string();
    if (!IsTesselStepFile(name) || !fs::is_regular_file(e.symlink_status(ec))) return name;
  }
  return ec ? StrCat("(unreadable: ", ec.message(), ")") : "";
}

}  // namespace

std::string FirstStrangerInCheckpointDir(const std::string& dir) {
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    const std::string base = name.substr(0, name.find(".tmp-"));
    const bool file = fs::is_regular_file(e.symlink_status(ec));
    if (file && (base == "latest" || base == "job" || name.rfind(".write-check.", 0) == 0)) continue;
    if (fs::is_directory(e.symlink_status(ec)) && ParseStepName(name).has_value()) {
      if (const std::string inner = FirstStranger(e.path().string()); !inner.empty()) return StrCat(name, "/", inner);
      continue;
    }
    return name;
  }
  return ec ? StrCat("(unreadable: ", ec.message(), ")") : "";
}

namespace {

// Removes a step directory of `job` (or one without a manifest, which in a claimed directory is this
// job's unfinished one), only when it holds nothing but Tessel's files; says why it keeps one otherwise.
void Prune(const std::string& step_dir, const std::string& job, const Logger& log) {
  if (const auto owner = ManifestJob(step_dir); owner && *owner != job) return;
  if (const std::string stranger = FirstStranger(step_dir); !stranger.empty()) {
    log.Warn(StrCat("not removing the old checkpoint ", step_dir, ": it holds ", stranger,
                    ", which Tessel does not write there"));
    return;
  }
  std::error_code ec;
  fs::remove_all(step_dir, ec);
  if (ec) log.Warn(StrCat("could not remove the old checkpoint ", step_dir, ": ", ec.message()));
}

// Why checkpoint `step_dir` cannot be resumed by `job` ("" if it can); *manifest_out gets its manifest.
std::string Verify(const std::string& step_dir, int64_t step, const std::string& job, Json* manifest_out) {
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
  if (!d.contains("job") || !d.at("job").is_string() || d.at("job").get<std::string>() != job) {
    return StrCat("written by job '",
                  d.contains("job") && d.at("job").is_string() ? d.at("job").get<std::string>() : "?", "', not by '",
                  job, "'");
  }
  const Json& shards = d.at("shards");
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
  *manifest_out = d;
  return "";
}

// The settings the manifest recorded against this job's: OK, or (refusing) kUsage naming the first key
// that differs; forced, every difference is a warning.
Status CheckSettings(const std::string& step_dir, const Json& manifest, const CheckpointOwner& owner,
                     SettingsCheck check, const Logger& log) {
  if (!manifest.contains("settings") || !manifest.at("settings").is_object()) {
    log.Warn(StrCat(step_dir,
                    " was written before checkpoints recorded their job's settings: resuming it without "
                    "checking that this job trains the same model on the same data"));
    return Status();
  }
  const Json& recorded = manifest.at("settings");
  for (const auto& [key, value] : owner.settings) {
    // A key this Tessel has and the checkpoint's did not is not compared (a newer Tessel's key).
    if (!recorded.contains(key) || !recorded.at(key).is_string()) continue;
    const std::string old = recorded.at(key).get<std::string>();
    if (old == value) continue;
    if (check == SettingsCheck::kWarnOnMismatch) {
      log.Warn(StrCat("--resume-force: resuming ", step_dir, " although it was written with ", key, " = ", old,
                      " and this job has ", value));
      continue;
    }
    return UsageError(StrCat("--resume: ", step_dir, " was written with ", key, " = ", old, ", this job has ", key,
                             " = ", value, ": a resume continues the same training, so its settings must ",
                             "match (use the checkpoint's value, another checkpoint.dir for a new job, or ",
                             "--resume-force to resume anyway)"));
  }
  return Status();
}

// Creates DIR/job naming `job` in one step (written under a temporary name, then linked into place, so
// that a reader never sees it empty); false in *lost when another process made it first.
Status WriteClaim(const std::string& claim, const std::string& job, bool* lost) {
  const std::string tmp = TemporaryPathFor(claim);
  {
    TESSEL_ASSIGN_OR_RETURN(FileDescriptor fd, CreateNewFile(tmp, 0644));
    const std::string text = job + "\n";
    if (::write(fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size()) || ::fsync(fd.get()) != 0) {
      const int err = errno;
      ::unlink(tmp.c_str());
      return StorageError(StrCat("cannot write ", tmp, ": ", std::strerror(err)));
    }
  }
  int rc = ::link(tmp.c_str(), claim.c_str());
  int err = errno;
  ::unlink(tmp.c_str());
  if (rc != 0 && (err == EPERM || err == EOPNOTSUPP || err == ENOSYS)) {
    // A file system without hard links (some FUSE and object-store mounts): O_EXCL, then the write.
    Result<FileDescriptor> fd = CreateNewFile(claim, 0644);
    rc = fd.ok() ? 0 : -1;
    err = fd.ok() ? 0 : (std::filesystem::exists(std::filesystem::symlink_status(claim)) ? EEXIST : EIO);
    const std::string text = job + "\n";
    if (fd.ok() && ::write(fd->get(), text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
      err = errno;
      rc = -1;
      ::unlink(claim.c_str());
    }
  }
  *lost = rc != 0 && err == EEXIST;
  if (rc != 0 && !*lost) return StorageError(StrCat("cannot create ", claim, ": ", std::strerror(err)));
  return Status();
}

Status OtherJob(const std::string& dir, const std::string& other, const std::string& where, const std::string& job) {
  return UsageError(StrCat("checkpoint.dir ", dir, " holds the checkpoints of job '", other, "' (", where,
                           "), not of '", job, "': two jobs in one checkpoint directory would prune and resume ",
                           "each other's checkpoints; give this job a checkpoint.dir of its own (or remove ", dir,
                           " once '", other, "''s checkpoints are no longer needed)"));
}

}  // namespace

Status ClaimCheckpointDir(const std::string& dir, const std::string& job, std::string* claimed, const Logger& log) {
  claimed->clear();
  TESSEL_RETURN_IF_ERROR(EnsurePrivateDirectory(dir, "checkpoint.dir"));
  const std::string claim = StrCat(dir, "/", kClaimFile);
  for (int attempt = 0; attempt < 2; ++attempt) {
    struct stat st {};
    if (::lstat(claim.c_str(), &st) == 0) {
      TESSEL_RETURN_IF_ERROR(CheckNotSymlink(claim));
      if (!S_ISREG(st.st_mode)) return StorageError(StrCat(claim, " is not a file: checkpoint.dir is not Tessel's"));
      TESSEL_ASSIGN_OR_RETURN(std::string text, ReadSmallFile(claim));
      const std::string owner = Trimmed(text);
      if (owner != job) return OtherJob(dir, owner, claim, job);
      return Status();
    }
    // Not claimed yet: a directory written before claims existed may hold another job's checkpoints.
    for (const StepEntry& e : StepEntries(dir)) {
      const std::string step_dir = StrCat(dir, "/", e.name);
      if (const auto owner = ManifestJob(step_dir); owner && *owner != job) {
        return OtherJob(dir, *owner, step_dir + "/manifest.json", job);
      }
    }
    bool lost = false;
    TESSEL_RETURN_IF_ERROR(WriteClaim(claim, job, &lost));
    if (!lost) {
      *claimed = claim;
      log.Debug(StrCat("checkpoint.dir ", dir, " is job '", job, "''s (", claim, ")"));
      return Status();
    }
  }
  return StorageError(StrCat("cannot claim ", dir, ": ", claim, " keeps changing"));
}

Status CommitCheckpoint(const std::string& dir, const CheckpointOwner& owner, int64_t step,
                        const std::vector<storage::FileDigest>& shards, int32_t keep, const Logger& log) {
  const std::string step_dir = storage::CheckpointStepDir(dir, step);
  TESSEL_RETURN_IF_ERROR(CheckNotSymlink(step_dir));
  Json settings = Json::object();
  for (const auto& [key, value] : owner.settings) settings[key] = value;
  Json manifest = {{"format", kFormat}, {"version", 1},         {"job", owner.job},
                   {"step", step},      {"settings", settings}, {"shards", Json::array()}};
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
  // Keep the newest `keep` complete checkpoints of this job; anything older of it goes, complete or not,
  // and so do the ones a resume set aside once this run has a checkpoint as new.
  int32_t kept = 0;
  for (const StepEntry& e : StepEntries(dir)) {
    if (e.step > step) continue;  // not ours to judge (a later run's)
    const std::string d = StrCat(dir, "/", e.name);
    if (!e.refused) {
      const auto job = ManifestJob(d);
      if (job && *job != owner.job) continue;  // another job's (a directory shared before claims)
      if (kept < keep && job) {
        ++kept;
        continue;
      }
      if (e.step == step) continue;
    }
    Prune(d, owner.job, log);
  }
  return Status();
}

Result<ResumePoint> FindResumePoint(const std::string& dir, const CheckpointOwner& owner, int32_t workers,
                                    SettingsCheck check, const Logger& log) {
  const std::string claim = StrCat(dir, "/", kClaimFile);
  if (auto text = ReadSmallFile(claim); text.ok() && Trimmed(*text) != owner.job) {
    return OtherJob(dir, Trimmed(*text), claim, owner.job);
  }
  std::vector<int64_t> candidates;
  int64_t latest = -1;
  if (auto text = ReadSmallFile(dir + "/latest"); text.ok()) {
    const std::string name = Trimmed(*text);
    const std::string digits = name.rfind("step-", 0) == 0 ? name.substr(5) : "";
    if (AllDigits(digits)) {
      latest = std::stoll(digits);
      candidates.push_back(latest);
    } else {
      log.Warn(StrCat(dir, "/latest is damaged ('", name, "'); looking for the newest checkpoint that verifies"));
    }
  }
  for (const StepEntry& e : StepEntries(dir)) {
    if (!e.refused && e.step != latest) candidates.push_back(e.step);
  }
  std::string refused;
  for (int64_t s : candidates) {
    const std::string step_dir = storage::CheckpointStepDir(dir, s);
    Json manifest;
    const std::string why = Verify(step_dir, s, owner.job, &manifest);
    if (why.empty()) {
      const auto written_by = static_cast<int32_t>(manifest.at("shards").size());
      if (written_by != workers) {
        return UsageError(StrCat("--resume: ", step_dir, " was written by ", written_by, " workers; this run has ",
                                 workers, " (resume with the same resources.workers and pipeline)"));
      }
      TESSEL_RETURN_IF_ERROR(CheckSettings(step_dir, manifest, owner, check, log));
      if (!refused.empty()) log.Warn(StrCat("resuming from the older checkpoint ", step_dir, " (step ", s, ")"));
      return ResumePoint{step_dir, s};
    }
    log.Warn(StrCat("checkpoint ", step_dir, " cannot be resumed: ", why));
    refused += StrCat("; step-", s, ": ", why);
  }
  return UsageError(StrCat("--resume: no checkpoint to resume in ", dir,
                           refused.empty() ? " (none was written: is checkpoint.every_steps > 0?)" : refused));
}

void SetAsideNewerCheckpoints(const std::string& dir, const std::string& job, int64_t step, const Logger& log) {
  for (const StepEntry& e : StepEntries(dir)) {
    if (e.refused || e.step <= step) continue;
    const std::string from = StrCat(dir, "/", e.name);
    if (const auto owner = ManifestJob(from); owner && *owner != job) continue;
    std::error_code ec;
    std::string to = from + ".refused";
    for (int n = 1; fs::exists(fs::symlink_status(to, ec)); ++n) to = StrCat(from, ".refused.", n);
    fs::rename(from, to, ec);
    if (ec) {
      log.Warn(StrCat("could not set aside ", from, ": ", ec.message()));
      continue;
    }
    log.Warn(StrCat("set aside ", from, " (newer than the checkpoint resumed) as ", fs::path(to).filename().string()));
  }
}

}  // namespace tessel::orchestrator
