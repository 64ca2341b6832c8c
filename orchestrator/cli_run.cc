#include "orchestrator/cli.h"

namespace tessel::cli {

void RegisterRunCommands(CLI::App& app, Status* result) {
  (void)app;
  (void)result;
}

}  // namespace tessel::cli
