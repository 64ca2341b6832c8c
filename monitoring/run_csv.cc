#include "monitoring/run_csv.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/logging.h"

namespace tessel::monitoring {

Result<RunCsv> RunCsv::Open(const std::string& path) {
  std::error_code ec;
  const bool fresh = !std::filesystem::exists(path, ec) || std::filesystem::file_size(path, ec) == 0;
  RunCsv csv;
  csv.path_ = path;
  csv.out_.open(path, std::ios::out | std::ios::app);
  if (!csv.out_) return StorageError(StrCat("cannot open ", path, " for writing: ", std::strerror(errno)));
  if (fresh) {
    csv.out_ << "rank,step";
    for (std::string_view c : kStepColumns) csv.out_ << ',' << c;
    csv.out_ << '\n';
    csv.out_.flush();
    if (!csv.out_) return StorageError(StrCat("cannot write ", path, ": ", std::strerror(errno)));
  }
  return csv;
}

Status RunCsv::Append(int32_t rank, int64_t step, const Record& figures) {
  out_ << rank << ',' << step;
  char cell[64];
  for (std::string_view c : kStepColumns) {
    out_ << ',';
    const std::optional<double> v = FindNumber(figures, c);
    if (!v) continue;
    std::snprintf(cell, sizeof cell, "%.15g", *v);
    out_ << cell;
  }
  out_ << '\n';
  out_.flush();
  if (!out_) return StorageError(StrCat("cannot write ", path_, ": ", std::strerror(errno)));
  return Status();
}

}  // namespace tessel::monitoring
