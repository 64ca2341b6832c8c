#include "orchestrator/run_output.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/json.h"
#include "orchestrator/checkpoints.h"

namespace tessel::orchestrator {
namespace {

namespace fs = std::filesystem;

// "runs/<name>-" + UTC yyyymmdd-hhmmss, the default run directory's stem.
std::string DefaultStem(const jobs::JobSpec& spec) {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
  return "runs/" + spec.job.name + "-" + stamp;
}

// Whether `name` is "<prefix>yyyymmdd-hhmmss" or that plus "-N": a default run directory of the job.
bool IsDefaultRunName(const std::string& name, const std::string& prefix) {
  if (name.rfind(prefix, 0) != 0 || name.size() < prefix.size() + 15) return false;
  const std::string rest = name.substr(prefix.size() + 15);
  return rest.empty() ||
         (rest.size() >= 2 && rest[0] == '-' && rest.find_first_not_of("0123456789", 1) == std::string::npos);
}

struct LockHolder {
  long pid = 0;
  std::string host;
};

LockHolder ReadLock(const std::string& path) {
  std::ifstream in(path);
  LockHolder h;
  std::string word;
  while (in >> word) {
    if (word == "pid") in >> h.pid;
    if (word == "host") in >> h.host;
  }
  return h;
}

// Whether the lock's process is gone: on this host, no such process, a zombie, or one that is not a tessel
// (its pid reused). A lock from another host cannot be checked from here.
bool LockIsStale(const LockHolder& h, const std::string& host, const std::string& path) {
  if (h.pid <= 0) {
    // Unreadable: a lock is complete from the moment it appears (written, then linked into place), except
    // on a file system without hard links, where it is written after it is made. Give such a writer 10 s.
    struct stat st {};
    return ::stat(path.c_str(), &st) != 0 || std::time(nullptr) - st.st_mtime > 10;
  }
  if (h.host != host) return false;
  // This process's own pid cannot be another live run's: a lock left by a container before it restarted.
  if (h.pid == ::getpid()) return true;
  if (::kill(static_cast<pid_t>(h.pid), 0) != 0 && errno == ESRCH) return true;
  // A zombie (killed, not yet reaped by its mpirun) is gone too: its state is Z and its cmdline empty.
  std::ifstream stat(StrCat("/proc/", h.pid, "/stat"));
  std::string line;
  std::getline(stat, line);
  if (const size_t paren = line.rfind(')');
      paren != std::string::npos && paren + 2 < line.size() && (line[paren + 2] == 'Z' || line[paren + 2] == 'X')) {
    return true;
  }
  std::ifstream cmdline(StrCat("/proc/", h.pid, "/cmdline"));
  std::string argv0;
  std::getline(cmdline, argv0, '\0');
  return argv0.find("tessel") == std::string::npos;
}

// Creates the lock, taking over a stale one (once: a second loser of a race is refused like any other).
Result<std::string> TakeLock(const std::string& dir, const std::string& host, const Logger& log) {
  const std::string path = StrCat(dir, "/", kRunLockName);
  const std::string text = StrCat("pid ", ::getpid(), " host ", host, "\n");
  for (int attempt = 0; attempt < 2; ++attempt) {
    // Written whole under a temporary name, then linked into place: link(2) fails when the lock exists,
    // so another run never sees it half-written. A file system without hard links gets O_EXCL, then the
    // write.
    const std::string tmp = TemporaryPathFor(path);
    TESSEL_RETURN_IF_ERROR(WriteFileAtomically(tmp, text));
    const int err = ::link(tmp.c_str(), path.c_str()) == 0 ? 0 : errno;
    ::unlink(tmp.c_str());
    if (err == 0) return path;
    if (err == EPERM || err == EOPNOTSUPP || err == ENOSYS) {
      Result<FileDescriptor> fd = CreateNewFile(path, 0644);
      if (fd.ok()) {
        if (::write(fd->get(), text.data(), text.size()) != static_cast<ssize_t>(text.size()) || fd->Close() != 0) {
          ::unlink(path.c_str());
          return StorageError(StrCat("cannot write the run lock ", path, ": ", std::strerror(errno)));
        }
        return path;
      }
    } else if (err != EEXIST) {
      return StorageError(StrCat("cannot create the run lock ", path, ": ", std::strerror(err)));
    }
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {  // a link, a directory: exit 6
      return StorageError(DescribeCreateFailure(path, EEXIST));
    }
    const LockHolder holder = ReadLock(path);
    if (!LockIsStale(holder, host, path)) {
      return UsageError(
          StrCat("job.output_dir: ", dir, " is in use by another run (pid ", holder.pid, " on ", holder.host,
                 "): two runs in one directory would mix their metrics, summaries and weights; choose another "
                 "job.output_dir",
                 holder.host != host ? StrCat(", or remove ", path, " if that run is gone") : std::string()));
    }
    log.Warn(StrCat("taking over ", path, ": its run (pid ", holder.pid, " on ", holder.host, ") is gone"));
    ::unlink(path.c_str());
  }
  return UsageError(StrCat("job.output_dir: ", dir, " was claimed by another run starting at the same time"));
}

// The entries of kRunDirEntries present in `dir`. A symbolic link among them, or anywhere below the
// weights/ and checkpoints/ directories, is kStorage naming it: a run never makes links, so someone else
// planted it where this run would write.
Result<std::vector<std::string>> EarlierRun(const std::string& dir) {
  std::vector<std::string> found;
  for (std::string_view name : kRunDirEntries) {
    const std::string path = StrCat(dir, "/", name);
    TESSEL_RETURN_IF_ERROR(CheckNotSymlink(path));
    std::error_code ec;
    const fs::file_type type = fs::symlink_status(path, ec).type();
    if (ec || type == fs::file_type::not_found) continue;
    found.emplace_back(name);
    if (type != fs::file_type::directory) continue;
    // The iterator never follows a link to a directory, so this walks only what lies in the run directory.
    for (auto it = fs::recursive_directory_iterator(path, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec)) {
      TESSEL_RETURN_IF_ERROR(CheckNotSymlink(it->path().string()));
    }
  }
  return found;
}

std::string Joined(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace

Result<std::unique_ptr<RunDirClaim>> RunDirClaim::Take(const std::string& chosen, const jobs::JobSpec& spec,
                                                       RunDirUse use, const std::string& host, const Logger& log) {
  std::string dir = use == RunDirUse::kResume ? chosen : spec.job.output_dir;
  bool created = false;
  if (dir.empty()) {
    // A new default directory: mkdir picks a name no other run has, even one started in the same second.
    TESSEL_RETURN_IF_ERROR(EnsurePrivateDirectory("runs", "the run directory"));
    const std::string stem = DefaultStem(spec);
    for (int n = 1; n <= 100 && !created; ++n) {
      dir = n == 1 ? stem : StrCat(stem, "-", n);
      if (::mkdir(dir.c_str(), 0700) == 0) {
        created = true;
      } else if (errno != EEXIST) {
        return StorageError(StrCat("cannot create the run directory ", dir, ": ", std::strerror(errno)));
      }
    }
    if (!created) return StorageError(StrCat("cannot create the run directory: ", stem, "-1..100 all exist"));
  } else {
    std::error_code ec;
    created = !fs::exists(dir, ec);
    TESSEL_RETURN_IF_ERROR(EnsurePrivateDirectory(dir, "job.output_dir"));
    created = created || (fs::is_empty(dir, ec) && !ec);
  }
  TESSEL_ASSIGN_OR_RETURN(std::string lock, TakeLock(dir, host, log));
  std::unique_ptr<RunDirClaim> claim(new RunDirClaim(dir, lock, created));
  TESSEL_ASSIGN_OR_RETURN(const std::vector<std::string> earlier, EarlierRun(dir));
  if (earlier.empty() || use == RunDirUse::kResume) return claim;
  if (use == RunDirUse::kNew) {
    return UsageError(StrCat("job.output_dir: ", dir, " holds an earlier run (", Joined(earlier),
                             "); choose another job.output_dir, continue it with --resume, or replace it with "
                             "--overwrite"));
  }
  // Nothing a user made is removed: a weights/ or checkpoints/ holding a file Tessel does not write there
  // is refused, naming it.
  for (const std::string& name : earlier) {
    const std::string path = StrCat(dir, "/", name);
    std::string stranger;
    std::error_code ec;
    if (name == "checkpoints" && fs::is_directory(fs::symlink_status(path, ec))) {
      stranger = FirstStrangerInCheckpointDir(path);
    } else if (name == "weights" && fs::is_directory(fs::symlink_status(path, ec))) {
      for (const fs::directory_entry& e : fs::directory_iterator(path, ec)) {
        const std::string file = e.path().filename().string();
        const std::string base = file.substr(0, file.find(".tmp-"));
        const bool stage = base.rfind("stage-", 0) == 0 && base.ends_with(".bin") && base.size() > 10 &&
                           base.find_first_not_of("0123456789", 6) == base.size() - 4;
        if (!stage || !fs::is_regular_file(e.symlink_status(ec))) {
          stranger = file;
          break;
        }
      }
    }
    if (!stranger.empty()) {
      return UsageError(StrCat("--overwrite: ", path, "/", stranger,
                               " is not a file Tessel writes there; move it out of ", dir,
                               " first (--overwrite removes only what a run wrote)"));
    }
  }
  for (const std::string& name : earlier) {
    std::error_code ec;
    fs::remove_all(fs::path(dir) / name, ec);  // a link is removed, never followed
    if (ec) return StorageError(StrCat("--overwrite: cannot remove ", dir, "/", name, ": ", ec.message()));
  }
  log.Warn(StrCat("--overwrite: removed the earlier run's ", Joined(earlier), " from ", dir));
  return claim;
}

void RunDirClaim::Release() {
  if (lock_.empty()) return;
  // Only our own lock: a run that took over a lock it thought stale must not lose it to us.
  const LockHolder holder = ReadLock(lock_);
  if (holder.pid == ::getpid()) ::unlink(lock_.c_str());
  lock_.clear();
}

RunDirClaim::~RunDirClaim() { Release(); }

Result<std::string> ResumeRunDir(const jobs::JobSpec& spec) {
  if (!spec.job.output_dir.empty()) return spec.job.output_dir;
  if (!spec.checkpoint.dir.empty()) return std::string();
  // runs/<name>-YYYYmmdd-HHMMSS[-N] sorts by time.
  const std::string prefix = spec.job.name + "-";
  std::string newest;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("runs", ec)) {
    const std::string name = e.path().filename().string();
    if (!IsDefaultRunName(name, prefix)) continue;
    if (!fs::is_directory(e.path() / "checkpoints", ec)) continue;
    newest = std::max(newest, name);
  }
  if (newest.empty()) {
    return UsageError("--resume: no earlier run of job '" + spec.job.name +
                      "' with checkpoints under runs/ (looked for runs/" + prefix +
                      "*/checkpoints); set job.output_dir or checkpoint.dir to the run to resume");
  }
  return "runs/" + newest;
}

Status WriteSummary(const std::string& run_dir, const Record& summary) {
  return WriteFileAtomically(run_dir + "/summary.json", FormatJson(RecordJson(summary), JsonLayout::kIndented) + "\n");
}

}  // namespace tessel::orchestrator
