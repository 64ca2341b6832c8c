// `tessel export`: a run's trained weights in another format (today: llm.c's GPT-2 checkpoint).
#include <iostream>
#include <memory>
#include <string>

#include "orchestrator/cli.h"
#include "storage/llmc.h"
#include "workers/llm/stage_weights.h"

namespace tessel::cli {

// tessel export llmc RUN_DIR OUT.bin: an llm run's trained weights as an llm.c GPT-2 checkpoint.
void RegisterExportCommands(CLI::App& app, Status* result) {
  CLI::App* exp = app.add_subcommand("export", "Write a run's trained weights in another format");
  exp->require_subcommand(1);
  auto run_dir = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  CLI::App* cmd = exp->add_subcommand("llmc", "An llm run's GPT-2 as an llm.c checkpoint (version 3, float32)");
  cmd->add_option("RUN_DIR", *run_dir, "The run directory (it holds weights/stage-*.bin)")->required();
  cmd->add_option("OUT", *out, "The checkpoint to write")->required();
  cmd->callback([run_dir, out, result] {
    Result<storage::LlmcCheckpoint> ck = workers::AssembleLlmc(*run_dir);
    if (!ck.ok()) {
      *result = ck.status();
      return;
    }
    *result = storage::WriteLlmcCheckpoint(*out, *ck);
    if (result->ok()) {
      std::cout << "wrote " << *out << ": " << ck->params.size() << " parameters, " << ck->config.num_layers
                << " layers, width " << ck->config.channels << "\n";
    }
  });
}

}  // namespace tessel::cli
