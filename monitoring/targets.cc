#include "monitoring/targets.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>
#include <system_error>

#include "core/file_descriptor.h"
#include "core/json.h"
#include "core/logging.h"

namespace tessel::monitoring {
namespace {

// Closes a file descriptor on every path out.
Status WriteAll(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return StorageError(std::strerror(errno));
    }
    done += static_cast<size_t>(n);
  }
  return Status::Ok();
}

Status WriteTemporary(const std::string& tmp, const std::string& data) {
  FileDescriptor fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (fd.get() < 0) return StorageError(std::strerror(errno));
  TESSEL_RETURN_IF_ERROR(WriteAll(fd.get(), data));
  if (::fsync(fd.get()) != 0) return StorageError(std::strerror(errno));
  if (fd.Close() != 0) return StorageError(std::strerror(errno));
  return Status::Ok();
}

}  // namespace

Result<std::string> FormatTargets(const std::string& job, const std::vector<Target>& targets) {
  if (job.empty()) return UsageError("targets file: the job name is empty");
  std::vector<Target> sorted = targets;
  std::stable_sort(sorted.begin(), sorted.end(), [](const Target& a, const Target& b) { return a.rank < b.rank; });
  std::set<int32_t> ranks;
  for (const Target& t : sorted) {
    if (!ranks.insert(t.rank).second) return UsageError(StrCat("targets file: rank ", t.rank, " appears twice"));
    if (t.host.empty()) return UsageError(StrCat("targets file: rank ", t.rank, " has an empty host"));
    if (t.role.empty()) return UsageError(StrCat("targets file: rank ", t.rank, " has an empty role"));
    if (t.port < 1 || t.port > 65535) {
      return UsageError(StrCat("targets file: rank ", t.rank, " has port ", t.port, ", outside 1..65535"));
    }
  }

  Json entries = Json::array();
  for (const Target& t : sorted) {
    const bool ipv6 = t.host.find(':') != std::string::npos;
    entries.push_back(
        {{"targets", Json::array({ipv6 ? StrCat("[", t.host, "]:", t.port) : StrCat(t.host, ":", t.port)})},
         {"labels", {{"job", job}, {"rank", std::to_string(t.rank)}, {"role", t.role}}}});
  }
  return FormatJson(entries, JsonLayout::kIndented) + "\n";
}

Status WriteTargetsFile(const std::string& path, const std::string& job, const std::vector<Target>& targets) {
  TESSEL_ASSIGN_OR_RETURN(std::string text, FormatTargets(job, targets));

  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(parent, ec);
    if (ec) {
      return StorageError(
          StrCat("cannot write targets file ", path, ": cannot create ", parent.string(), ": ", ec.message()));
    }
  }
  const std::string tmp = StrCat(path, ".tmp.", ::getpid());
  if (Status st = WriteTemporary(tmp, text); !st.ok()) {
    ::unlink(tmp.c_str());
    return StorageError(StrCat("cannot write targets file ", path, ": ", tmp, ": ", st.message()));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string cause = std::strerror(errno);
    ::unlink(tmp.c_str());
    return StorageError(StrCat("cannot write targets file ", path, ": rename from ", tmp, ": ", cause));
  }
  return Status::Ok();
}

}  // namespace tessel::monitoring
