// What `tessel plugin list|inspect|check` print, kept out of the CLI so tests can drive it.
// Each function writes a human-readable report to `out` and returns the outcome: any problem is a
// PluginError (exit 4). Thread safety: any thread; each call loads plugins into its own registry.
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "workers/plugin_host/conformance.h"

namespace tessel::workers {

// Lists every libtessel_*.so in `dirs` (DefaultPluginDirs() when empty): name, version, ABI, kernel
// count. Each file is loaded on its own, so one broken plugin does not hide the others; it is listed
// with its error, and the call fails after the whole listing.
Status ListPlugins(const std::vector<std::string>& dirs, std::ostream& out);

// Prints a plugin's info and every (op, device, schema) it registers.
Status InspectPlugin(const std::string& path, std::ostream& out);

// Loads a plugin and validates it as a worker would: file permissions, the ELF file, the init symbol,
// the ABI version, schema syntax and equality with the host's table; then, if `required_ops` is not
// empty, that each is provided for `device`; then, given `conformance`, runs its kernels against the
// built-in plugins of DefaultPluginDirs() (conformance.h) and fails when any kernel does.
Status CheckPlugin(const std::string& path, const std::vector<std::string>& required_ops, Device device,
                   std::ostream& out, const std::optional<ConformanceOptions>& conformance = std::nullopt);

// Inspect and Check load the plugin in a child process (fork), so that a plugin that crashes while it
// loads (its initialisers, tessel_plugin_init) or while its kernels run gets a verdict, a PluginError naming it and the
// signal, rather than ending the caller. These do the same in the calling process.
Status InspectPluginHere(const std::string& path, std::ostream& out);
Status CheckPluginHere(const std::string& path, const std::vector<std::string>& required_ops, Device device,
                       std::ostream& out, const std::optional<ConformanceOptions>& conformance = std::nullopt);

// An op family ("nn", "optim", "rgnn": every host op of that prefix), or a comma-separated list of op
// names. Empty names are a UsageError.
Result<std::vector<std::string>> ExpandOpSet(std::string_view spec);

// "cpu" or "cuda".
Result<Device> ParseDevice(std::string_view name);

}  // namespace tessel::workers
