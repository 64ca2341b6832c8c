// A directory that every rank of an mpirun writes its own files into (`tessel partition --input`,
// `tessel generate graph --chunked`), with the one-process rule of a whole output or none: rank 0
// creates a new temporary sibling of `out` on the storage the ranks share, every rank checks that it
// sees it and runs `write(tmp)`, then rank 0 runs `finish(tmp, out)` (its own files and the rename into
// place); a failure anywhere removes the temporary directory once every rank has stopped writing.
// Every step is agreed (RankGroup::Agree): each rank returns the same status.
// Thread safety: a collective over the group's ranks.
#pragma once

#include <filesystem>
#include <functional>

#include "core/status.h"
#include "orchestrator/partitioning/rank_group.h"

namespace tessel::orchestrator {

// A new directory beside `out` (its parent is created): mkdir refuses anything already there, a link
// included, and nothing there is removed.
Result<std::filesystem::path> MakeTemporaryDirectory(const std::filesystem::path& out);

Status WriteDirectoryOnRanks(const RankGroup& group, const std::filesystem::path& out,
                             const std::function<Status(const std::filesystem::path& tmp)>& write,
                             const std::function<Status(const std::filesystem::path& tmp)>& finish);

}  // namespace tessel::orchestrator
