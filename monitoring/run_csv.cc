#include "monitoring/run_csv.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/logging.h"
#include "core/safe_file.h"

namespace tessel::monitoring {

Result<RunCsv> RunCsv::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return StorageError(StrCat("cannot open for writing: ", DescribeCreateFailure(path, errno)));
  struct stat st {};
  const bool fresh = ::fstat(fd, &st) == 0 && st.st_size == 0;
  RunCsv csv;
  csv.path_ = path;
  csv.out_.reset(::fdopen(fd, "a"));
  if (!csv.out_) {
    ::close(fd);
    return StorageError(StrCat("cannot open ", path, " for writing: ", std::strerror(errno)));
  }
  if (fresh) {
    std::string header = "rank,step";
    for (std::string_view c : kStepColumns) header += StrCat(",", c);
    header += "\n";
    if (std::fputs(header.c_str(), csv.out_.get()) < 0 || std::fflush(csv.out_.get()) != 0) {
      return StorageError(StrCat("cannot write ", path, ": ", std::strerror(errno)));
    }
  }
  return csv;
}

Status RunCsv::Append(int32_t rank, int64_t step, const Record& figures) {
  std::string row = StrCat(rank, ",", step);
  char cell[64];
  for (std::string_view c : kStepColumns) {
    row += ',';
    const std::optional<double> v = FindNumber(figures, c);
    if (!v) continue;
    std::snprintf(cell, sizeof cell, "%.15g", *v);
    row += cell;
  }
  row += '\n';
  if (std::fputs(row.c_str(), out_.get()) < 0 || std::fflush(out_.get()) != 0) {
    return StorageError(StrCat("cannot write ", path_, ": ", std::strerror(errno)));
  }
  return Status();
}

}  // namespace tessel::monitoring
