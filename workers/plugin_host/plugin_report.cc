#include "workers/plugin_host/plugin_report.h"

#include <tessel/plugin.h>

#include <iomanip>

#include "core/logging.h"
#include "workers/plugin_host/kernel_registry.h"
#include "workers/plugin_host/op_table.h"
#include "workers/plugin_host/plugin_files.h"

namespace tessel::workers {
namespace {

// The report carries the errors; the registry's own log only adds what the report does not say.
Logger QuietLogger() { return Logger("tessel plugin", LogLevel::kError); }

std::string HostAbi() { return StrCat(TESSEL_PLUGIN_ABI_MAJOR, ".", TESSEL_PLUGIN_ABI_MINOR); }

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
      KernelRegistry registry(QuietLogger());
      if (Status st = registry.LoadPlugin(file); !st.ok()) {
        out << "  ERROR " << st.message() << "\n";
        ++failures;
        continue;
      }
      for (const PluginInfo& p : registry.plugins()) {
        out << "  " << std::left << std::setw(16) << p.name << " " << std::setw(10) << p.version << " ABI "
            << p.abi_major << "." << p.abi_minor << "  " << std::right << std::setw(3) << p.kernels.size()
            << " kernels  " << p.path << "\n";
      }
    }
  }
  if (failures > 0) return PluginError(StrCat(failures, " plugin(s) or directories could not be loaded; see above"));
  return Status::Ok();
}

Status InspectPlugin(const std::string& path, std::ostream& out) {
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

Status CheckPlugin(const std::string& path, const std::vector<std::string>& required_ops, Device device,
                   std::ostream& out) {
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
    if (op.empty()) return UsageError(StrCat("empty op name in '", spec, "' (use an op family such as 'rgnn', or a comma-separated list)"));
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
