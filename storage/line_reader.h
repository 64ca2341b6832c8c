// Reading text inputs line by line, through libarchive: plain files, compressed files (gzip, bzip2, xz or
// zstd, detected by their content, not their name) and tar archives, plain or compressed (detected by a
// valid tar header), whose members are read in sorted member-name order.
//
// Thread safety: any thread; each call owns its file and libarchive state. Failure: a missing file,
// corrupt or truncated compressed data, or a malformed archive is kBadData naming the file (and the
// member, inside an archive); a read error from the OS is kStorage.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace tessel::storage {

struct TextInputOptions {
  // For tar archives: the members to read (exact member name or its base name). Empty means every
  // member whose name ends in .txt or .tsv. Ignored for files that are not archives.
  std::vector<std::string> members;
};

// Called for each line, without its trailing "\n" or "\r\n" (a last line without a newline is still
// visited); `source` is the path, or "path:member" inside an archive, and `line_number` counts from 1.
// A non-OK return stops the walk and is passed through.
using LineVisitor = std::function<Status(const std::string& source, int64_t line_number, std::string_view line)>;

// Visits every line of a plain, compressed or tar input. Archive members are buffered in memory so that
// they can be visited in sorted name order; other inputs are streamed. A line longer than 64 MiB is
// kBadData ("source:line: line longer than 64 MiB").
Status ForEachLine(const std::string& path, const TextInputOptions& options, const LineVisitor& visit);

// "path size=BYTES mtime=SECONDS" for source fingerprints; "path missing" when stat fails.
std::string DescribeSourceFile(const std::string& path);

}  // namespace tessel::storage
