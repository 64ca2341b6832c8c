// tessel: the command-line entry point. See `tessel --help` and DESIGN.md "CLI".
#include <cstdio>
#include <iostream>

#include "core/version.h"
#include "orchestrator/cli.h"

int main(int argc, char** argv) {
  CLI::App app{"Tessel: a distributed training orchestrator for relational GNNs and pipelined LLMs"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string(tessel::kTesselVersion));
  tessel::Status result;
  tessel::cli::RegisterRunCommands(app, &result);
  tessel::cli::RegisterDataCommands(app, &result);
  tessel::cli::RegisterExportCommands(app, &result);
  tessel::cli::RegisterPartitionCommands(app, &result);
  tessel::cli::RegisterPluginCommands(app, &result);
  tessel::cli::RegisterSmokeCommand(app, &result);
  tessel::cli::RegisterReportCommand(app, &result);
  app.add_subcommand("version", "Print the version and build facts")->callback([] {
    std::cout << "tessel " << tessel::kTesselVersion << " (plugin ABI " << tessel::kPluginAbiString << ")\n";
  });
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;  // every usage error is exit 2
  }
  if (!result.ok()) {
    // An empty message was printed elsewhere (by rank 0 of an mpirun whose ranks agreed on the error).
    if (result.message().empty()) return result.exit_code();
    // A stop (exit 7) is not an error: "tessel: stopped by SIGTERM after step ...".
    std::fprintf(stderr, "tessel: %s%s\n",
                 result.code() == tessel::Code::kStopped ? "" : "error: ", result.message().c_str());
    return result.exit_code();
  }
  return 0;
}
