#include "orchestrator/cli.h"

namespace tessel::cli {

void RegisterDataCommands(CLI::App& app, Status* result) {
  (void)app;
  (void)result;
}

}  // namespace tessel::cli
