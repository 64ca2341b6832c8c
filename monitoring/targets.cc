#include "monitoring/targets.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>
#include <system_error>

#include "core/json.h"
#include "core/logging.h"
#include "core/safe_file.h"

namespace tessel::monitoring {
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
  if (Status st = WriteFileAtomically(path, text); !st.ok()) {
    return StorageError(StrCat("cannot write targets file ", path, ": ", st.message()));
  }
  return Status::Ok();
}

}  // namespace tessel::monitoring
