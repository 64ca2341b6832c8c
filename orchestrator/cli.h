// The `tessel` command line: each family of subcommands registers itself on the CLI11 app.
// A subcommand's callback stores its outcome in *result; main() prints a non-OK status and exits
// with its code (DESIGN.md "Exit codes").
#pragma once

#include <CLI/CLI.hpp>
#include <charconv>
#include <cstdint>
#include <string>

#include "core/status.h"
#include "storage/chunked_import.h"

namespace tessel::cli {

void RegisterRunCommands(CLI::App& app, Status* result);        // run, validate, plan  (cli_run.cc)
void RegisterDataCommands(CLI::App& app, Status* result);       // import, generate, inspect (cli_data.cc)
void RegisterExportCommands(CLI::App& app, Status* result);     // export llmc (cli_export.cc)
void RegisterPartitionCommands(CLI::App& app, Status* result);  // partition (cli_partition.cc)
void RegisterPluginCommands(CLI::App& app, Status* result);     // plugin list|inspect|check (cli_plugin.cc)
void RegisterSmokeCommand(CLI::App& app, Status* result);       // smoke (cli_smoke.cc)
void RegisterReportCommand(CLI::App& app, Status* result);      // report (cli_report.cc)

// How a chunked graph is read (the node_data keys and the derived relations), for `tessel import chunked`
// and `tessel partition --input` alike (cli_data.cc).
void AddChunkedReadOptions(CLI::App* cmd, storage::ChunkedImportOptions* options);

// The check of a whole-number option: "--parts: must be a whole number >= 1, got 0" (CLI::PositiveNumber
// would print a double's range, "0.000000 to 1797693...", 309 digits).
inline CLI::Validator WholeNumberAtLeast(int64_t min) {
  return CLI::Validator(
      [min](std::string& text) -> std::string {
        int64_t v = 0;
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
        if (ec != std::errc() || end != text.data() + text.size() || v < min) {
          return "must be a whole number >= " + std::to_string(min) + ", got " + text;
        }
        return std::string();
      },
      "INT >= " + std::to_string(min));
}

}  // namespace tessel::cli
