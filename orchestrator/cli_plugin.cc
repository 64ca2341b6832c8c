// `tessel plugin list|inspect|check`: what a kernel author runs before naming a plugin in a job file.
// The reports themselves live in workers/plugin_host/plugin_report.h; any problem exits 4.
#include <iostream>
#include <memory>
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
};

Status Check(const PluginArgs& args) {
  std::vector<std::string> ops;
  if (!args.require_ops.empty()) {
    TESSEL_ASSIGN_OR_RETURN(ops, workers::ExpandOpSet(args.require_ops));
  }
  TESSEL_ASSIGN_OR_RETURN(Device device, workers::ParseDevice(args.device));
  return workers::CheckPlugin(args.path, ops, device, std::cout);
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
      "check", "Load a plugin as a worker would and validate its ABI and schemas (exit 4 on any problem)");
  check->add_option("SO", args->path, "The plugin shared object")->required();
  check->add_option("--require-ops", args->require_ops,
                    "Ops the plugin must provide: 'rgcn' or a comma-separated list of op names");
  check->add_option("--device", args->device, "Device of the required ops: cpu or cuda")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  check->callback([=] { *result = Check(*args); });
}

}  // namespace tessel::cli
