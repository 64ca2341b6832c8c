#include "workers/plugin_host/kernel_registry.h"

#include <tessel/plugin.h>

#include <algorithm>
#include <cstddef>
#include <exception>
#include <filesystem>
#include <tuple>

#include "workers/plugin_host/host_status.h"
#include "workers/plugin_host/op_table.h"
#include "workers/plugin_host/plugin_files.h"
#include "workers/plugin_host/shared_library.h"

#ifndef TESSEL_HOST_VERSION
#define TESSEL_HOST_VERSION "unknown"
#endif

namespace tessel::workers {

struct KernelRegistry::LoadedPlugin {
  SharedLibrary library;
  FileId id;
  PluginInfo info;
};

// One load in progress: the registrations a plugin makes during tessel_plugin_init are buffered here
// and committed only once the whole plugin checks out.
struct KernelRegistry::PendingLoad {
  const KernelRegistry* registry;
  std::string path;
  struct PendingKernel {
    KernelKey key;
    std::string schema_text;
    Schema schema;
    tessel_kernel_fn fn;
    void* state;
    size_t params_size;
    uint32_t floating_dtypes;
  };
  std::vector<PendingKernel> kernels;
  Status first_error;
};

namespace {

std::string_view DeviceLabel(Device device) { return DeviceName(device); }

std::string AbiString(int major, int minor) { return StrCat(major, ".", minor); }

Result<Device> DeviceFromAbi(int32_t device) {
  switch (device) {
    case TESSEL_DEVICE_CPU:
      return Device::kCpu;
    case TESSEL_DEVICE_CUDA:
      return Device::kCuda;
    default:
      return PluginError(StrCat("unknown device ", device));
  }
}

std::string CopyCString(const char* text, std::string_view fallback) {
  return text != nullptr && *text != '\0' ? std::string(text) : std::string(fallback);
}

}  // namespace

// The C side of tessel_host_api. Every callback catches everything: nothing may unwind into a plugin.
struct RegistryCallbacks {
  static tessel_status* RegisterKernel(void* registry, const tessel_kernel_def* def) noexcept {
    auto* pending = static_cast<KernelRegistry::PendingLoad*>(registry);
    try {
      Status status = pending->registry->Register(*pending, def);
      if (status.ok()) return nullptr;
      if (pending->first_error.ok()) pending->first_error = status;
      return MakeHostStatus(TESSEL_STATUS_PLUGIN, status.message().c_str());
    } catch (const std::exception& e) {
      if (pending->first_error.ok()) pending->first_error = InternalError(StrCat("registering a kernel: ", e.what()));
      return MakeHostStatus(TESSEL_STATUS_INTERNAL, e.what());
    } catch (...) {
      if (pending->first_error.ok()) pending->first_error = InternalError("registering a kernel: unknown exception");
      return MakeHostStatus(TESSEL_STATUS_INTERNAL, "unknown exception");
    }
  }

  static tessel_status* MakeStatus(void* /*registry*/, int32_t code, const char* message) noexcept {
    return MakeHostStatus(code, message);
  }

  static void Log(void* registry, int32_t level, const char* message) noexcept {
    auto* pending = static_cast<KernelRegistry::PendingLoad*>(registry);
    try {
      const LogLevel log_level = level <= 0   ? LogLevel::kDebug
                                 : level == 1 ? LogLevel::kInfo
                                 : level == 2 ? LogLevel::kWarn
                                              : LogLevel::kError;
      pending->registry->logger_.Log(log_level, StrCat("plugin ", pending->path, ": ", message ? message : ""));
    } catch (...) {
      // Logging is best effort; it must never unwind into the plugin.
    }
  }
};

KernelRegistry::KernelRegistry(Logger logger) : logger_(std::move(logger)) {}
KernelRegistry::~KernelRegistry() {
  kernels_.clear();  // explicit: kernels point into the libraries that plugins_ closes next
  plugins_.clear();
}
KernelRegistry::KernelRegistry(KernelRegistry&&) noexcept = default;
KernelRegistry& KernelRegistry::operator=(KernelRegistry&&) noexcept = default;

Status KernelRegistry::Register(PendingLoad& pending, const tessel_kernel_def* def) const {
  const std::string who = StrCat("plugin ", pending.path);
  if (def == nullptr) return PluginError(StrCat(who, " registered a null kernel definition"));
  if (def->struct_size < offsetof(tessel_kernel_def, kernel_state) + sizeof(def->kernel_state)) {
    return PluginError(
        StrCat(who, " registered a kernel definition of ", def->struct_size, " bytes, older than ABI 1.0 allows"));
  }
  if (def->op == nullptr || *def->op == '\0')
    return PluginError(StrCat(who, " registered a kernel without an op name"));
  const std::string op = def->op;
  Result<Device> abi_device = DeviceFromAbi(def->device);
  if (!abi_device.ok()) return PluginError(StrCat(who, " op ", op, ": unknown device ", def->device));
  const Device device = *abi_device;
  const std::string where = StrCat(who, " op ", op, " (", DeviceLabel(device), ")");
  if (def->fn == nullptr) return PluginError(StrCat(where, ": null kernel function"));
  if (def->schema == nullptr) return PluginError(StrCat(where, ": no schema"));
  const std::string schema_text = def->schema;
  Result<Schema> schema = ParseSchema(schema_text);
  if (!schema.ok()) return schema.status().WithContext(where);
  if (schema->op != op) {
    return PluginError(StrCat(where, ": the schema names op '", schema->op, "': '", schema_text, "'"));
  }
  if (std::string_view expected = ExpectedSchema(op); !expected.empty()) {
    Result<Schema> expected_schema = ParseSchema(expected);
    if (!expected_schema.ok()) return InternalError(StrCat("the host's schema for ", op, " is malformed"));
    if (expected_schema->ToString() != schema->ToString()) {
      return PluginError(StrCat(where, ": schema mismatch: the host expects '", expected, "', the plugin declares '",
                                schema_text, "'"));
    }
  }
  // ABI 1.1 fields: a 1.0 definition ends before them and declares no parameters and f32/f64 only.
  size_t params_size = 0;
  uint32_t floating_dtypes = 0;
  if (def->struct_size >= offsetof(tessel_kernel_def, floating_dtypes) + sizeof(def->floating_dtypes)) {
    params_size = def->params_size;
    floating_dtypes = def->floating_dtypes;
  }
  if (floating_dtypes == 0) floating_dtypes = TESSEL_DTYPE_BIT(TESSEL_DTYPE_F32) | TESSEL_DTYPE_BIT(TESSEL_DTYPE_F64);
  constexpr uint32_t kFloating = TESSEL_DTYPE_BIT(TESSEL_DTYPE_F32) | TESSEL_DTYPE_BIT(TESSEL_DTYPE_F64) |
                                 TESSEL_DTYPE_BIT(TESSEL_DTYPE_BF16) | TESSEL_DTYPE_BIT(TESSEL_DTYPE_F16);
  if ((floating_dtypes & ~kFloating) != 0) {
    return PluginError(StrCat(where, ": floating_dtypes names a dtype that is not floating"));
  }
  if (const tessel_op_decl* decl = FindOp(op); decl != nullptr && params_size != decl->params_size) {
    return PluginError(StrCat(where, ": its parameter struct has ", params_size, " bytes, the host's has ",
                              decl->params_size, " (rebuild the plugin against this Tessel's SDK)"));
  }
  KernelKey key{op, device};
  for (const auto& k : pending.kernels) {
    if (k.key == key) return PluginError(StrCat(where, ": registered twice"));
  }
  pending.kernels.push_back({std::move(key), schema_text, std::move(schema).value(), def->fn, def->kernel_state,
                             params_size, floating_dtypes});
  return Status::Ok();
}

Status KernelRegistry::CheckAbi(const PendingLoad& pending, int major, int minor) const {
  const std::string plugin_abi = AbiString(major, minor);
  const std::string host_abi = AbiString(TESSEL_PLUGIN_ABI_MAJOR, TESSEL_PLUGIN_ABI_MINOR);
  logger_.Info(StrCat("plugin ", pending.path, ": built for ABI ", plugin_abi, ", host ABI ", host_abi));
  if (major == TESSEL_PLUGIN_ABI_MAJOR && minor <= TESSEL_PLUGIN_ABI_MINOR) return Status::Ok();
  const std::string why = major != TESSEL_PLUGIN_ABI_MAJOR ? "the majors differ" : "the host's minor is older";
  return PluginError(StrCat("plugin ", pending.path, " built for ABI ", plugin_abi, ", host has ", host_abi, " (", why,
                            "; rebuild the plugin against this Tessel's SDK)"));
}

Status KernelRegistry::LoadPlugin(const std::string& path) {
  TESSEL_ASSIGN_OR_RETURN(SafePluginFile file, CheckPluginFile(path));
  for (const auto& plugin : plugins_) {
    if (plugin->id == file.id) {
      logger_.Debug(StrCat("plugin ", path, " is already loaded as ", plugin->info.path));
      return Status::Ok();
    }
  }
  TESSEL_ASSIGN_OR_RETURN(SharedLibrary library, SharedLibrary::Open(file.canonical_path));
  TESSEL_ASSIGN_OR_RETURN(void* symbol, library.Symbol(TESSEL_PLUGIN_INIT_SYMBOL));
  auto init = reinterpret_cast<tessel_plugin_init_fn>(symbol);

  PendingLoad pending{this, file.canonical_path, {}, Status::Ok()};
  tessel_host_api host{};
  host.struct_size = sizeof(tessel_host_api);
  host.abi_major = TESSEL_PLUGIN_ABI_MAJOR;
  host.abi_minor = TESSEL_PLUGIN_ABI_MINOR;
  host.host_version = TESSEL_HOST_VERSION;
  host.registry = &pending;
  host.register_kernel = &RegistryCallbacks::RegisterKernel;
  host.make_status = &RegistryCallbacks::MakeStatus;
  host.log = &RegistryCallbacks::Log;
  tessel_plugin_info info{};
  info.struct_size = sizeof(tessel_plugin_info);

  tessel_status* returned = nullptr;
  try {
    returned = init(&host, &info);
  } catch (const std::exception& e) {
    return PluginError(StrCat("plugin ", pending.path, ": tessel_plugin_init threw (a plugin bug): ", e.what()));
  } catch (...) {
    return PluginError(
        StrCat("plugin ", pending.path, ": tessel_plugin_init threw an unknown exception (a plugin bug)"));
  }
  Status init_status = TakeStatus(returned, StrCat("plugin ", pending.path, ": tessel_plugin_init failed"));
  TESSEL_RETURN_IF_ERROR(CheckAbi(pending, info.abi_major, info.abi_minor));
  // A refused registration is the root cause of an init that then fails; report it rather than init's echo.
  if (!pending.first_error.ok()) return Status(Code::kPlugin, pending.first_error.message());
  if (!init_status.ok()) return Status(Code::kPlugin, init_status.message());

  auto plugin = std::make_unique<LoadedPlugin>(LoadedPlugin{std::move(library), file.id, PluginInfo{}});
  PluginInfo& out = plugin->info;
  out.path = file.canonical_path;
  out.name = CopyCString(info.name, std::filesystem::path(file.canonical_path).stem().string());
  out.version = CopyCString(info.version, "unversioned");
  out.description = CopyCString(info.description, "");
  out.abi_major = info.abi_major;
  out.abi_minor = info.abi_minor;
  for (auto& k : pending.kernels) {
    out.kernels.push_back({k.key.op, k.key.device, k.schema_text});
    const std::vector<OutputRows> rows = OutputRowsFor(k.key.op);
    kernels_[k.key].push_back(std::make_unique<Kernel>(k.key.op, k.key.device, k.schema_text, std::move(k.schema), rows,
                                                       k.fn, k.state, file.canonical_path, k.params_size,
                                                       k.floating_dtypes));
  }
  std::sort(out.kernels.begin(), out.kernels.end(), [](const KernelInfo& a, const KernelInfo& b) {
    return std::tie(a.op, a.device) < std::tie(b.op, b.device);
  });
  logger_.Info(
      StrCat("loaded plugin ", out.path, " (", out.name, " ", out.version, "): ", out.kernels.size(), " kernels"));
  plugins_.push_back(std::move(plugin));
  return Status::Ok();
}

Status KernelRegistry::LoadDefaults(const std::vector<std::string>& paths,
                                    const std::vector<std::string>& search_dirs) {
  for (const std::string& path : paths) TESSEL_RETURN_IF_ERROR(LoadPlugin(path));
  std::vector<std::string> dirs = search_dirs;
  if (paths.empty() && search_dirs.empty()) {
    const std::vector<std::string> defaults = DefaultPluginDirs();
    if (defaults.empty()) {
      return PluginError(
          "no plugin directory found next to the executable (looked for <exe>/../plugins and "
          "<exe>/../lib/tessel/plugins); name plugins in [plugins] paths or search_dirs");
    }
    dirs = {defaults.front()};
  }
  for (const std::string& dir : dirs) {
    TESSEL_ASSIGN_OR_RETURN(std::vector<std::string> files, FindPluginFiles(dir));
    if (files.empty()) logger_.Warn(StrCat("plugin directory ", dir, " holds no libtessel_*.so"));
    for (const std::string& file : files) TESSEL_RETURN_IF_ERROR(LoadPlugin(file));
  }
  for (const std::string& name : prefer_) {
    const bool loaded =
        std::any_of(plugins_.begin(), plugins_.end(), [&](const auto& p) { return p->info.name == name; });
    if (!loaded) {
      std::string names;
      for (const auto& p : plugins_) names += StrCat(names.empty() ? "" : ", ", p->info.name);
      return PluginError(StrCat("plugins.prefer names '", name, "', but no loaded plugin has that name (loaded: ",
                                names.empty() ? "none" : names, ")"));
    }
  }
  for (const auto& [key, candidates] : kernels_) {
    if (candidates.size() < 2) {
      logger_.Debug(
          StrCat("op ", key.op, " (", DeviceLabel(key.device), "): plugin ", PluginNameOf(*candidates.front())));
      continue;
    }
    Result<const Kernel*> chosen = Choose(key, candidates);
    if (!chosen.ok()) continue;  // an error if a job looks it up
    std::string others;
    for (const auto& k : candidates) {
      if (k.get() != *chosen) others += StrCat(others.empty() ? "" : ", ", PluginNameOf(*k));
    }
    logger_.Info(StrCat("op ", key.op, " (", DeviceLabel(key.device), "): plugin ", PluginNameOf(**chosen),
                        " (plugins.prefer), not ", others));
  }
  return Status::Ok();
}

std::string KernelRegistry::PluginNameOf(const Kernel& kernel) const {
  for (const auto& p : plugins_) {
    if (p->info.path == kernel.plugin_path()) return p->info.name;
  }
  return kernel.plugin_path();
}

Result<const Kernel*> KernelRegistry::Choose(const KernelKey& key,
                                             const std::vector<std::unique_ptr<Kernel>>& candidates) const {
  if (candidates.size() == 1) return candidates.front().get();
  for (const std::string& name : prefer_) {
    for (const auto& k : candidates) {
      if (PluginNameOf(*k) == name) return k.get();
    }
  }
  std::string offered;
  for (size_t i = 0; i < candidates.size(); ++i) {
    offered += StrCat(i == 0                       ? ""
                      : i + 1 == candidates.size() ? " and "
                                                   : ", ",
                      "'", PluginNameOf(*candidates[i]), "' (", candidates[i]->plugin_path(), ")");
  }
  return PluginError(StrCat("op '", key.op, "' for device ", DeviceLabel(key.device), " is provided by ",
                            candidates.size() == 2 ? "both " : "", offered,
                            ": name the one to use first in [plugins] prefer"));
}

std::string KernelRegistry::LoadedList() const {
  if (plugins_.empty()) return "loaded: none";
  std::string out = "loaded:";
  for (const auto& plugin : plugins_) {
    out += ' ';
    out += std::filesystem::path(plugin->info.path).filename().string();
  }
  return out;
}

Result<const Kernel*> KernelRegistry::Find(std::string_view op, Device device) const {
  auto it = kernels_.find(KernelKey{std::string(op), device});
  if (it == kernels_.end()) {
    return PluginError(
        StrCat("no loaded plugin provides op '", op, "' for device ", DeviceLabel(device), " (", LoadedList(), ")"));
  }
  return Choose(it->first, it->second);
}

Status KernelRegistry::RequireOps(const std::vector<std::string>& ops, Device device) const {
  std::vector<std::string> missing, problems;
  for (const std::string& op : ops) {
    auto it = kernels_.find(KernelKey{op, device});
    if (it == kernels_.end()) {
      missing.push_back(op);
      continue;
    }
    Result<const Kernel*> chosen = Choose(it->first, it->second);
    if (!chosen.ok()) {
      problems.push_back(chosen.status().message());
      continue;
    }
    const std::string_view expected = ExpectedSchema(op);
    if (expected.empty()) continue;  // an op the host has no schema for: the caller vouches for it
    Result<Schema> want = ParseSchema(expected);
    const Schema& have = (*chosen)->parsed_schema();
    if (!want.ok() || want->ToString() != have.ToString()) {
      problems.push_back(StrCat("plugin ", (*chosen)->plugin_path(), " op ", op,
                                ": schema mismatch: the host expects '", expected, "', the plugin declares '",
                                (*chosen)->schema(), "'"));
    }
  }
  if (!missing.empty()) {
    std::string message = StrCat("no loaded plugin provides op '", missing[0], "' for device ", DeviceLabel(device));
    for (size_t i = 1; i < missing.size(); ++i) message += StrCat(i == 1 ? ", nor '" : ", '", missing[i], "'");
    problems.insert(problems.begin(), message);
  }
  if (problems.empty()) return Status::Ok();
  std::string message;
  for (const std::string& p : problems) message += (message.empty() ? "" : "; ") + p;
  return PluginError(StrCat(message, " (", LoadedList(), ")"));
}

std::vector<ServedKernel> KernelRegistry::Served() const {
  std::vector<ServedKernel> out;
  for (const auto& [key, candidates] : kernels_) {
    Result<const Kernel*> chosen = Choose(key, candidates);
    if (!chosen.ok()) continue;
    for (const auto& p : plugins_) {
      if (p->info.path != (*chosen)->plugin_path()) continue;
      out.push_back(
          ServedKernel{key.op, key.device, p->info.name, p->info.version, p->info.abi_major, p->info.abi_minor});
      break;
    }
  }
  return out;
}

std::vector<PluginInfo> KernelRegistry::plugins() const {
  std::vector<PluginInfo> out;
  out.reserve(plugins_.size());
  for (const auto& plugin : plugins_) out.push_back(plugin->info);
  return out;
}

}  // namespace tessel::workers
