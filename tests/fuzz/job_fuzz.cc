// libFuzzer target: the job-file parser and validator (jobs/spec.h: ParseJob, ValidateJob,
// FormatJobToml). The input is the text of a job file; each of its comment lines "#--set KEY=VALUE" is
// also passed to ParseJob as a --set override, so the override parser is fuzzed with the same input.
// A job may be refused, but a job that parses must pass ValidateJob again, and its resolved form
// (FormatJobToml) must parse back to an equal job that formats to the same text.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "jobs/spec.h"

namespace tessel::jobs {
namespace {

[[noreturn]] void Fail(const std::string& what, const std::string& detail) {
  std::fprintf(stderr, "job_fuzz: %s\n%s\n", what.c_str(), detail.c_str());
  std::abort();
}

std::vector<std::string> Overrides(std::string_view text) {
  constexpr std::string_view kPrefix = "#--set ";
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(pos, end - pos);
    if (line.starts_with(kPrefix)) out.emplace_back(line.substr(kPrefix.size()));
    pos = end + 1;
  }
  return out;
}

bool SameJob(const JobSpec& a, const JobSpec& b) {
  return a.version == b.version && a.job == b.job && a.resources == b.resources && a.data == b.data &&
         a.model == b.model && a.train == b.train && a.partition == b.partition && a.pipeline == b.pipeline &&
         a.spill == b.spill && a.checkpoint == b.checkpoint && a.plugins == b.plugins && a.metrics == b.metrics &&
         a.timeouts == b.timeouts;
}

void Check(std::string_view text) {
  Result<JobSpec> spec = ParseJob(text, "fuzz.toml", Overrides(text));
  if (!spec.ok()) return;
  if (Status st = ValidateJob(*spec); !st.ok()) Fail("ParseJob accepted a job that ValidateJob refuses", st.ToString());
  const std::string resolved = FormatJobToml(*spec);
  Result<JobSpec> again = ParseJob(resolved, "fuzz.toml", {});
  if (!again.ok()) Fail("the resolved job does not parse: " + again.status().ToString(), resolved);
  if (!SameJob(*spec, *again)) Fail("the resolved job parses to a different job", resolved);
  if (FormatJobToml(*again) != resolved) Fail("the resolved job formats differently when parsed back", resolved);
}

}  // namespace
}  // namespace tessel::jobs

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tessel::jobs::Check(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
