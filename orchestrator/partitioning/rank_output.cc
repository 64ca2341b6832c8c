#include "orchestrator/partitioning/rank_output.h"

#include <sys/stat.h>

#include <cerrno>
#include <string>

#include "core/logging.h"
#include "core/safe_file.h"

namespace tessel::orchestrator {

namespace fs = std::filesystem;

Result<fs::path> MakeTemporaryDirectory(const fs::path& out) {
  std::error_code ec;
  const fs::path parent = out.has_parent_path() ? out.parent_path() : fs::path(".");
  fs::create_directories(parent, ec);
  if (ec) return StorageError(StrCat("cannot create ", parent.string(), ": ", ec.message()));
  const fs::path tmp = TemporaryPathFor(out.string());
  if (::mkdir(tmp.c_str(), 0755) != 0) return StorageError(StrCat("cannot create ", DescribeCreateFailure(tmp, errno)));
  return tmp;
}

Status WriteDirectoryOnRanks(const RankGroup& group, const fs::path& out,
                             const std::function<Status(const fs::path& tmp)>& write,
                             const std::function<Status(const fs::path& tmp)>& finish) {
  const bool root = group.rank() == 0;
  std::string tmp;
  Status st;
  if (root) {
    Result<fs::path> made = MakeTemporaryDirectory(out);
    st = made.status();
    if (made.ok()) tmp = made->string();
  }
  TESSEL_RETURN_IF_ERROR(group.Agree(st));
  TESSEL_RETURN_IF_ERROR(group.Broadcast(&tmp, 0));
  const auto abandon = [&](const Status& why) {
    std::error_code ec;
    if (root) fs::remove_all(tmp, ec);
    return why;
  };
  std::error_code ec;
  st = group.Agree(fs::is_directory(tmp, ec)
                       ? Status::Ok()
                       : StorageError(StrCat("cannot see ", tmp, ", which rank 0 created: ", out.string(),
                                             " must be on storage every rank shares")));
  if (st.ok()) st = group.Agree(write(tmp));
  if (st.ok()) st = group.Agree(root ? finish(tmp) : Status::Ok());
  return st.ok() ? st : abandon(st);
}

}  // namespace tessel::orchestrator
