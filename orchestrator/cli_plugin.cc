// `tessel plugin list|inspect|check`: what a kernel author runs before naming a plugin in a job file.
// The reports themselves live in workers/plugin_host/plugin_report.h; any problem exits 4.
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "orchestrator/cli.h"
#include "workers/plugin_host/plugin_report.h"

namespace tessel::cli {
namespace {

struct PluginArgs {
  std::vector<std::string> dirs;
  std::string path;
  std::string require_ops;
  std::string device = "cpu";
  bool no_run = false;
  workers::ConformanceOptions conformance;
};

Status Check(const PluginArgs& args) {
  std::vector<std::string> ops;
  if (!args.require_ops.empty()) {
    TESSEL_ASSIGN_OR_RETURN(ops, workers::ExpandOpSet(args.require_ops));
  }
  TESSEL_ASSIGN_OR_RETURN(Device device, workers::ParseDevice(args.device));
  std::optional<workers::ConformanceOptions> run;
  if (!args.no_run) run = args.conformance;
  return workers::CheckPlugin(args.path, ops, device, std::cout, run);
}

}  // namespace

void RegisterPluginCommands(CLI::App& app, Status* result) {
  CLI::App* plugin = app.add_subcommand("plugin", "List, inspect and check kernel plugins");
  plugin->require_subcommand(1);
  auto args = std::make_shared<PluginArgs>();

  CLI::App* list = plugin->add_subcommand(
      "list",
      "List the libtessel_*.so plugins of a directory (default: <exe>/../plugins, then <exe>/../lib/tessel/plugins)");
  list->add_option("--dir", args->dirs, "A plugin directory (repeatable)");
  list->callback([=] { *result = workers::ListPlugins(args->dirs, std::cout); });

  CLI::App* inspect =
      plugin->add_subcommand("inspect", "Print a plugin's info and every (op, device, schema) it registers");
  inspect->add_option("SO", args->path, "The plugin shared object")->required();
  inspect->callback([=] { *result = workers::InspectPlugin(args->path, std::cout); });

  CLI::App* check = plugin->add_subcommand(
      "check",
      "Load a plugin as a worker would, validate its ABI and schemas, then run every kernel whose op Tessel knows "
      "against the built-in one: values on random shapes, guard bytes, determinism, finite-difference gradients, "
      "time (exit 4 on any problem)");
  check->add_option("SO", args->path, "The plugin shared object")->required();
  check->add_option("--require-ops", args->require_ops,
                    "Ops the plugin must provide: 'rgcn' or a comma-separated list of op names");
  check->add_option("--device", args->device, "Device of the required ops: cpu or cuda")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  check->add_flag("--no-run", args->no_run, "Only load and validate; run no kernel");
  check->add_option("--threads", args->conformance.threads, "Threads of the pool both kernels get (default 2)")
      ->check(CLI::Range(1, 1024));
  check->add_option("--seed", args->conformance.seed, "Seed of the random inputs");
  check->add_option("--reference-dir", args->conformance.reference_dirs,
                    "Directory of the reference plugins (repeatable; default: the built-in plugins beside tessel)");
  check
      ->add_option("--timing-runs", args->conformance.timing_runs,
                   "Calls timed per kernel on the largest shape, the median reported (default 5; 0: no timing)")
      ->check(CLI::Range(0, 1000));
  check->callback([=] { *result = Check(*args); });
}

}  // namespace tessel::cli
