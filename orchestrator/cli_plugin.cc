#include "orchestrator/cli.h"

namespace tessel::cli {

void RegisterPluginCommands(CLI::App& app, Status* result) {
  (void)app;
  (void)result;
}

}  // namespace tessel::cli
