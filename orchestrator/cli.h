// The `tessel` command line: each family of subcommands registers itself on the CLI11 app.
// A subcommand's callback stores its outcome in *result; main() prints a non-OK status and exits
// with its code (DESIGN.md "Exit codes").
#pragma once

#include <CLI/CLI.hpp>

#include "core/status.h"

namespace tessel::cli {

void RegisterRunCommands(CLI::App& app, Status* result);        // run, validate, plan  (cli_run.cc)
void RegisterDataCommands(CLI::App& app, Status* result);       // import, generate, inspect (cli_data.cc)
void RegisterExportCommands(CLI::App& app, Status* result);     // export llmc (cli_export.cc)
void RegisterPartitionCommands(CLI::App& app, Status* result);  // partition (cli_partition.cc)
void RegisterPluginCommands(CLI::App& app, Status* result);     // plugin list|inspect|check (cli_plugin.cc)
void RegisterSmokeCommand(CLI::App& app, Status* result);       // smoke (cli_smoke.cc)
void RegisterReportCommand(CLI::App& app, Status* result);      // report (cli_report.cc)

}  // namespace tessel::cli
