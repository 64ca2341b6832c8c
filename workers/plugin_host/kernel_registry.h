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

class KernelRegistry {
 public:
  explicit KernelRegistry(Logger logger = Logger());
  ~KernelRegistry();
  KernelRegistry(KernelRegistry&&) noexcept;
  KernelRegistry& operator=(KernelRegistry&&) noexcept;
  KernelRegistry(const KernelRegistry&) = delete;
  KernelRegistry& operator=(const KernelRegistry&) = delete;

  // Loads one plugin: refuses a world-writable file or directory, dlopens it (RTLD_NOW|RTLD_LOCAL),
  // calls its tessel_plugin_init, then checks the ABI (same major, host minor >= plugin minor), every
  // kernel's schema (syntax, and equality with ExpectedSchema for ops the host knows) and duplicate
  // (op, device) pairs across plugins. Kernels are committed only if all of that holds. Loading the
  // same file again (by device and inode) is a no-op.
  Status LoadPlugin(const std::string& path);

  // Loads every path in `paths`, then every libtessel_*.so in each of `search_dirs` (sorted by name).
  // When both are empty, loads the libtessel_*.so files of the first DefaultPluginDirs() entry. Stops
  // at the first error.
  Status LoadDefaults(const std::vector<std::string>& paths, const std::vector<std::string>& search_dirs);

  // Checks that every op has a kernel for `device` whose schema is the host's expected one. The error
  // lists every problem, and the loaded plugins.
  Status RequireOps(const std::vector<std::string>& ops, Device device) const;

  // The kernel for (op, device), owned by the registry.
  Result<const Kernel*> Find(std::string_view op, Device device) const;

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

  Logger logger_;
  std::vector<std::unique_ptr<LoadedPlugin>> plugins_;
  // Declared after plugins_ so that kernels die before the libraries that hold their code.
  std::map<KernelKey, std::unique_ptr<Kernel>> kernels_;
};

}  // namespace tessel::workers
