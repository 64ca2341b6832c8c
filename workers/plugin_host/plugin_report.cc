#include "workers/plugin_host/plugin_report.h"

#include <signal.h>
#include <sys/wait.h>
#include <tessel/plugin.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iomanip>
#include <sstream>

#include "core/logging.h"
#include "workers/plugin_host/kernel_registry.h"
#include "workers/plugin_host/op_table.h"
#include "workers/plugin_host/plugin_files.h"

namespace tessel::workers {
namespace {

// The report carries the errors; the registry's own log only adds what the report does not say.
Logger QuietLogger() { return Logger("tessel plugin", LogLevel::kError); }

std::string HostAbi() { return StrCat(TESSEL_PLUGIN_ABI_MAJOR, ".", TESSEL_PLUGIN_ABI_MINOR); }

bool WriteAll(int fd, const void* data, size_t n) {
  const auto* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

constexpr std::string_view kWhileLoading =
    "loading or initialising it (a corrupt file, or a bug in its initialisers or tessel_plugin_init)";

// Runs `body` in a child process, which loads the plugin (dlopen runs its initialisers; tessel_plugin_init
// runs), so that whatever the plugin does there (a bad pointer, an abort, a SIGBUS from a file cut short
// after the check) becomes a verdict on `path`, not the death of this process. The child sends back its
// report and its status through a pipe: [int32 code][int64 message length][message][report]. After a
// crash, `crash_prefix` and the verdict are written to `out` in place of the report.
Status InChildProcess(const std::string& path, const std::function<Status(std::ostream&)>& body,
                      std::string_view crash_prefix, std::string_view while_doing, std::ostream& out) {
  int fds[2];
  if (pipe(fds) != 0) return InternalError(StrCat("pipe: ", std::strerror(errno)));
  std::fflush(nullptr);
  out.flush();
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return InternalError(StrCat("fork: ", std::strerror(errno)));
  }
  if (pid == 0) {
    close(fds[0]);
    std::ostringstream report;
    const Status st = body(report);
    const int32_t code = static_cast<int32_t>(st.code());
    const std::string& message = st.message();
    const int64_t length = static_cast<int64_t>(message.size());
    const std::string text = report.str();
    const bool sent = WriteAll(fds[1], &code, sizeof code) && WriteAll(fds[1], &length, sizeof length) &&
                      WriteAll(fds[1], message.data(), message.size()) && WriteAll(fds[1], text.data(), text.size());
    close(fds[1]);
    _exit(sent ? 0 : 1);  // no atexit handlers, no static destructors: the parent owns those
  }
  close(fds[1]);
  std::string bytes;
  char buf[4096];
  for (;;) {
    const ssize_t r = read(fds[0], buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    bytes.append(buf, static_cast<size_t>(r));
  }
  close(fds[0]);
  int wstatus = 0;
  while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  constexpr size_t kHead = sizeof(int32_t) + sizeof(int64_t);
  if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0 && bytes.size() >= kHead) {
    int32_t code = 0;
    int64_t length = 0;
    std::memcpy(&code, bytes.data(), sizeof code);
    std::memcpy(&length, bytes.data() + sizeof code, sizeof length);
    if (length >= 0 && static_cast<size_t>(length) <= bytes.size() - kHead) {
      out << bytes.substr(kHead + static_cast<size_t>(length));
      if (code == 0) return Status::Ok();
      return Status(static_cast<Code>(code), bytes.substr(kHead, static_cast<size_t>(length)));
    }
  }
  const std::string how = WIFSIGNALED(wstatus)
                              ? StrCat("died of signal ", WTERMSIG(wstatus), " (", strsignal(WTERMSIG(wstatus)), ")")
                              : StrCat("exited ", WEXITSTATUS(wstatus), " without a report");
  const Status st = PluginError(StrCat("plugin ", path, " crashed the process that loaded it: it ", how, " while ",
                                       while_doing, "; nothing else was affected"));
  out << crash_prefix << st.message() << "\n";
  return st;
}

// The conformance table of the plugin just loaded into `registry`, against the built-in plugins.
Status RunConformance(const KernelRegistry& registry, const std::string& path, const ConformanceOptions& options,
                      std::ostream& out) {
  std::string canonical = path;
  for (const PluginInfo& p : registry.plugins()) canonical = p.path;
  // The reference: the built-in plugins (the first default directory, as a job loads them), less the
  // plugin under check when it lies among them. A copy of it there would offer its ops twice and leave
  // them with no reference.
  std::vector<std::string> dirs = options.reference_dirs;
  if (const std::vector<std::string> defaults = DefaultPluginDirs(); dirs.empty() && !defaults.empty()) {
    dirs = {defaults.front()};
  }
  KernelRegistry reference(QuietLogger());
  bool among = false;
  for (const std::string& dir : dirs) {
    Result<std::vector<std::string>> files = FindPluginFiles(dir);
    if (!files.ok()) {
      out << "  FAIL the reference plugins: " << files.status().message() << "\n";
      return files.status();
    }
    for (const std::string& file : *files) {
      std::error_code ec;
      if (std::filesystem::equivalent(file, canonical, ec)) {
        among = true;
        continue;
      }
      if (Status st = reference.LoadPlugin(file); !st.ok()) {
        out << "  FAIL a reference plugin did not load: " << st.message() << "\n";
        return st;
      }
    }
  }
  if (dirs.empty()) {
    out << "  note no built-in plugins next to this tessel: kernels are checked for guard bytes, determinism and "
           "gradients, and each dtype and device against the op's own f64 CPU kernel (vs ref: ... (f64))\n";
  } else if (among) {
    out << "  note this plugin lies among the reference plugins and is left out of the reference: an op no other "
           "plugin there offers (every op of a built-in plugin) is checked for guard bytes, determinism and "
           "gradients, and its f32, bf16 and CUDA kernels against the op's own f64 CPU kernel (vs ref: ... (f64))\n";
  }
  const ConformanceSummary summary = CheckConformance(registry, canonical, reference, out, options);
  if (summary.failed > 0) {
    out << "  FAIL " << summary.failed << " kernel check(s) failed; see the table\n";
    return PluginError(StrCat("plugin ", path, ": ", summary.failed, " kernel check(s) failed the conformance run (",
                              summary.passed, " passed, ", summary.skipped, " skipped)"));
  }
  out << "  ok   " << summary.passed << " kernel checks passed (" << summary.skipped << " skipped)\n";
  return Status::Ok();
}

}  // namespace

Status ListPlugins(const std::vector<std::string>& dirs_in, std::ostream& out) {
  std::vector<std::string> dirs = dirs_in.empty() ? DefaultPluginDirs() : dirs_in;
  if (dirs.empty()) {
    return PluginError(
        "no plugin directory found next to the executable (<exe>/../plugins, "
        "<exe>/../lib/tessel/plugins); pass --dir");
  }
  int failures = 0;
  for (const std::string& dir : dirs) {
    out << "plugins in " << dir << " (host ABI " << HostAbi() << ")\n";
    Result<std::vector<std::string>> files = FindPluginFiles(dir);
    if (!files.ok()) {
      out << "  ERROR " << files.status().message() << "\n";
      ++failures;
      continue;
    }
    if (files->empty()) out << "  (none)\n";
    for (const std::string& file : *files) {
      const Status listed = InChildProcess(
          file,
          [&](std::ostream& report) {
            KernelRegistry registry(QuietLogger());
            if (Status st = registry.LoadPlugin(file); !st.ok()) {
              report << "  ERROR " << st.message() << "\n";
              return st;
            }
            for (const PluginInfo& p : registry.plugins()) {
              report << "  " << std::left << std::setw(16) << p.name << " " << std::setw(10) << p.version << " ABI "
                     << p.abi_major << "." << p.abi_minor << "  " << std::right << std::setw(3) << p.kernels.size()
                     << " kernels  " << p.path << "\n";
            }
            return Status::Ok();
          },
          "  ERROR ", kWhileLoading, out);
      if (!listed.ok()) ++failures;
    }
  }
  if (failures > 0) return PluginError(StrCat(failures, " plugin(s) or directories could not be loaded; see above"));
  return Status::Ok();
}

Status InspectPlugin(const std::string& path, std::ostream& out) {
  return InChildProcess(
      path, [&](std::ostream& report) { return InspectPluginHere(path, report); }, "", kWhileLoading, out);
}

Status CheckPlugin(const std::string& path, const std::vector<std::string>& required_ops, Device device,
                   std::ostream& out, const std::optional<ConformanceOptions>& conformance) {
  return InChildProcess(
      path, [&](std::ostream& report) { return CheckPluginHere(path, required_ops, device, report, conformance); },
      StrCat("checking ", path, "\n  FAIL "),
      conformance ? "loading it or running its kernels (a corrupt file, a bug in its initialisers or "
                    "tessel_plugin_init, or a kernel that reads or writes out of bounds)"
                  : kWhileLoading,
      out);
}

Status InspectPluginHere(const std::string& path, std::ostream& out) {
  KernelRegistry registry(QuietLogger());
  TESSEL_RETURN_IF_ERROR(registry.LoadPlugin(path));
  for (const PluginInfo& p : registry.plugins()) {
    out << "plugin:      " << p.name << "\n"
        << "version:     " << p.version << "\n"
        << "description: " << p.description << "\n"
        << "abi:         " << p.abi_major << "." << p.abi_minor << " (host " << HostAbi() << ")\n"
        << "path:        " << p.path << "\n"
        << "kernels:     " << p.kernels.size() << "\n";
    for (const KernelInfo& k : p.kernels) {
      out << "  " << std::left << std::setw(26) << k.op << " " << std::setw(5) << DeviceName(k.device) << " "
          << k.schema << "\n";
    }
  }
  return Status::Ok();
}

Status CheckPluginHere(const std::string& path, const std::vector<std::string>& required_ops, Device device,
                       std::ostream& out, const std::optional<ConformanceOptions>& conformance) {
  out << "checking " << path << "\n";
  KernelRegistry registry(QuietLogger());
  if (Status st = registry.LoadPlugin(path); !st.ok()) {
    out << "  FAIL " << st.message() << "\n";
    return st;
  }
  for (const PluginInfo& p : registry.plugins()) {
    out << "  ok   loads: " << p.name << " " << p.version << ", ABI " << p.abi_major << "." << p.abi_minor << " (host "
        << HostAbi() << ")\n";
    int known = 0;
    for (const KernelInfo& k : p.kernels) {
      if (ExpectedSchema(k.op).empty()) {
        out << "  note op " << k.op << " (" << DeviceName(k.device)
            << ") is not in the host's table: its schema parses, but no worker calls it yet\n";
      } else {
        ++known;
      }
    }
    out << "  ok   " << p.kernels.size() << " kernels; the schemas of " << known << " known ops match the host\n";
  }
  if (!required_ops.empty()) {
    if (Status st = registry.RequireOps(required_ops, device); !st.ok()) {
      out << "  FAIL " << st.message() << "\n";
      return st;
    }
    out << "  ok   provides all " << required_ops.size() << " required ops for " << DeviceName(device) << "\n";
  }
  if (conformance) TESSEL_RETURN_IF_ERROR(RunConformance(registry, path, *conformance, out));
  out << "PASS\n";
  return Status::Ok();
}

Result<std::vector<std::string>> ExpandOpSet(std::string_view spec) {
  if (std::vector<std::string> family = OpsOfFamily(spec); !family.empty()) return family;
  std::vector<std::string> ops;
  size_t begin = 0;
  while (begin <= spec.size()) {
    size_t end = spec.find(',', begin);
    if (end == std::string_view::npos) end = spec.size();
    std::string_view op = spec.substr(begin, end - begin);
    if (op.empty())
      return UsageError(
          StrCat("empty op name in '", spec, "' (use an op family such as 'rgnn', or a comma-separated list)"));
    ops.emplace_back(op);
    begin = end + 1;
  }
  return ops;
}

Result<Device> ParseDevice(std::string_view name) {
  if (name == "cpu") return Device::kCpu;
  if (name == "cuda") return Device::kCuda;
  return UsageError(StrCat("unknown device '", name, "' (expected cpu or cuda)"));
}

}  // namespace tessel::workers
