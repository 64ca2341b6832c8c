// KernelRegistry: loads plugin shared objects (include/tessel/plugin.h) and finds their kernels by
// (op, device). Built-in kernels are plugins too; there is no other way in.
//
//   KernelRegistry registry(logger);
//   TESSEL_RETURN_IF_ERROR(registry.LoadDefaults(job.plugins.paths, job.plugins.search_dirs));
//   TESSEL_RETURN_IF_ERROR(registry.RequireOps({"rgnn.aggregate.fwd", "nn.relu.fwd"}, Device::kCpu));
//   TESSEL_ASSIGN_OR_RETURN(const Kernel* fwd, registry.Find("rgnn.aggregate.fwd", Device::kCpu));
//   TESSEL_RETURN_IF_ERROR(fwd->Call({&y, &edge_uniq, &norm, &dst_ptr, &dst_edges}, {&h}, &pool));
//
// Ownership: the registry owns every loaded library (an RAII dlopen handle) and every Kernel; both live
// until the registry is destroyed, kernels first. Kernel pointers stay valid across moves of the
// registry and across later loads.
// Thread safety: load plugins from one thread; once loading is done, the const methods and
// Kernel::Call may be used from any thread.
// Failure: every error is a Status with Code::kPlugin (exit 4) whose message names the plugin file,
// and the op, symbol or versions concerned. A refused plugin leaves the registry unchanged.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/logging.h"
#include "core/status.h"
#include "core/tensor.h"
#include "workers/plugin_host/kernel.h"

namespace tessel::workers {

struct KernelInfo {
  std::string op;
  Device device = Device::kCpu;
  std::string schema;
};

struct PluginInfo {
  std::string path;  // canonical path of the loaded file
  std::string name;
  std::string version;
  std::string description;
  int abi_major = 0;
  int abi_minor = 0;
  std::vector<KernelInfo> kernels;  // sorted by (op, device)
};

// The plugin that serves one (op, device).
struct ServedKernel {
  std::string op;
  Device device = Device::kCpu;
  std::string plugin;  // PluginInfo::name
  std::string version;
  int abi_major = 0;
  int abi_minor = 0;
};

class KernelRegistry {
 public:
  explicit KernelRegistry(Logger logger = Logger());
  ~KernelRegistry();
  KernelRegistry(KernelRegistry&&) noexcept;
  KernelRegistry& operator=(KernelRegistry&&) noexcept;
  KernelRegistry(const KernelRegistry&) = delete;
  KernelRegistry& operator=(const KernelRegistry&) = delete;

  // Loads one plugin: refuses a world-writable file or directory or a file that is not a whole ELF
  // shared object, dlopens it (RTLD_NOW|RTLD_LOCAL|RTLD_NODELETE), calls its tessel_plugin_init, then checks the ABI
  // (same major, host minor >= plugin minor), every kernel's schema (syntax, and equality with
  // ExpectedSchema for ops the host knows) and (op, device) pairs registered twice by the plugin. Kernels
  // are committed only if all of that holds. Loading the same file again (by device and inode) is a
  // no-op. Two plugins may offer the same (op, device): Find decides (SetPreference).
  Status LoadPlugin(const std::string& path);

  // Loads every path in `paths`, then every libtessel_*.so in each of `search_dirs` (sorted by name).
  // When both are empty, loads the libtessel_*.so files of the first DefaultPluginDirs() entry. Stops
  // at the first error. Then every name SetPreference gave must be a loaded plugin's, and each (op,
  // device) that several plugins offer and the preference decides is logged with the plugin chosen
  // (info; every other (op, device) with its plugin at debug level).
  Status LoadDefaults(const std::vector<std::string>& paths, const std::vector<std::string>& search_dirs);

  // Which plugin serves an (op, device) that several loaded plugins offer: the first of `plugin_names`
  // (PluginInfo::name, the job's [plugins] prefer) that offers it. Without one, such an op is an error
  // naming both plugins when it is looked up.
  void SetPreference(std::vector<std::string> plugin_names) { prefer_ = std::move(plugin_names); }

  // Checks that every op has a kernel for `device` whose schema is the host's expected one. The error
  // lists every problem, and the loaded plugins.
  Status RequireOps(const std::vector<std::string>& ops, Device device) const;

  // The kernel for (op, device), owned by the registry: the only one, or the preferred one of several.
  Result<const Kernel*> Find(std::string_view op, Device device) const;
  // Every (op, device) the loaded plugins offer, sorted, with the plugin that serves it: the only one or
  // the preferred one. An op that several offer and the preference does not decide is left out (looking
  // it up is an error).
  std::vector<ServedKernel> Served() const;
  // The name of the plugin that serves `kernel` (one of this registry's).
  std::string PluginNameOf(const Kernel& kernel) const;

  // What was loaded, in load order.
  std::vector<PluginInfo> plugins() const;

 private:
  struct LoadedPlugin;
  struct PendingLoad;
  struct KernelKey {
    std::string op;
    Device device;
    auto operator<=>(const KernelKey&) const = default;
  };

  friend struct RegistryCallbacks;  // the C callbacks of tessel_host_api, in kernel_registry.cc

  Status Register(PendingLoad& pending, const tessel_kernel_def* def) const;
  Status CheckAbi(const PendingLoad& pending, int major, int minor) const;
  std::string LoadedList() const;
  // The kernel that serves `key` among its candidates (load order), by the preference; kPlugin when
  // several offer it and the preference names none of them.
  Result<const Kernel*> Choose(const KernelKey& key, const std::vector<std::unique_ptr<Kernel>>& candidates) const;

  Logger logger_;
  std::vector<std::unique_ptr<LoadedPlugin>> plugins_;
  std::vector<std::string> prefer_;
  // Declared after plugins_ so that kernels die before the libraries that hold their code. Every plugin's
  // kernel for a key, in load order.
  std::map<KernelKey, std::vector<std::unique_ptr<Kernel>>> kernels_;
};

}  // namespace tessel::workers
