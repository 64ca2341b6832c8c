#include "workers/assignment.h"

namespace tessel::workers {

std::string_view DeviceRequestName(DeviceRequest request) {
  switch (request) {
    case DeviceRequest::kAuto:
      return "auto";
    case DeviceRequest::kCpu:
      return "cpu";
    case DeviceRequest::kCuda:
      return "cuda";
  }
  return "?";
}

void EncodeSettings(const WorkerSettings& s, ByteWriter& out) {
  out.PutString(s.job_name);
  out.Put(s.seed);
  out.Put(static_cast<int32_t>(s.log_level));
  out.Put(s.threads);
  out.Put(static_cast<int32_t>(s.device));
  out.Put(s.memory_budget_bytes);
  out.Put<uint64_t>(s.plugin_paths.size());
  for (const std::string& p : s.plugin_paths) out.PutString(p);
  out.Put<uint64_t>(s.plugin_search_dirs.size());
  for (const std::string& p : s.plugin_search_dirs) out.PutString(p);
  out.PutString(s.metrics_bind);
  out.Put(s.metrics_port_base);
  out.Put(s.heartbeat_interval_seconds);
  out.Put(s.step_timeout_seconds);
  out.Put(s.startup_timeout_seconds);
  out.PutString(s.checkpoint_dir);
  out.Put(s.checkpoint_every_steps);
  out.PutString(s.resume_step_dir);
  out.Put(s.resume_step);
}

namespace {

std::vector<std::string> GetStrings(ByteReader& in, const char* what) {
  const uint64_t n = in.Get<uint64_t>(what);
  std::vector<std::string> out;
  // Each string takes at least its 8-byte length: this bounds a corrupt count before allocating.
  if (n > in.remaining() / sizeof(uint64_t)) in.Fail(StrCat(what, ": count exceeds the message"));
  for (uint64_t i = 0; in.ok() && i < n; ++i) out.push_back(in.GetString(what));
  return out;
}

}  // namespace

WorkerSettings DecodeSettings(ByteReader& in) {
  WorkerSettings s;
  s.job_name = in.GetString("job name");
  s.seed = in.Get<uint64_t>("seed");
  const int32_t level = in.Get<int32_t>("log level");
  if (level < static_cast<int32_t>(LogLevel::kDebug) || level > static_cast<int32_t>(LogLevel::kError)) {
    in.Fail("log level out of range");
  }
  s.log_level = static_cast<LogLevel>(level);
  s.threads = in.Get<int32_t>("threads");
  const int32_t device = in.Get<int32_t>("device");
  if (device < 0 || device > 2) in.Fail("device out of range");
  s.device = static_cast<DeviceRequest>(device);
  s.memory_budget_bytes = in.Get<int64_t>("memory budget");
  s.plugin_paths = GetStrings(in, "plugin paths");
  s.plugin_search_dirs = GetStrings(in, "plugin search dirs");
  s.metrics_bind = in.GetString("metrics bind");
  s.metrics_port_base = in.Get<int32_t>("metrics port base");
  s.heartbeat_interval_seconds = in.Get<double>("heartbeat interval");
  s.step_timeout_seconds = in.Get<double>("step timeout");
  s.startup_timeout_seconds = in.Get<double>("startup timeout");
  s.checkpoint_dir = in.GetString("checkpoint dir");
  s.checkpoint_every_steps = in.Get<int32_t>("checkpoint every");
  s.resume_step_dir = in.GetString("resume dir");
  s.resume_step = in.Get<int64_t>("resume step");
  if (in.ok() && (s.checkpoint_every_steps < 0 || s.resume_step < 0)) in.Fail("checkpoint settings out of range");
  if (in.ok() && s.threads < 1) in.Fail("threads must be >= 1");
  return s;
}

}  // namespace tessel::workers
